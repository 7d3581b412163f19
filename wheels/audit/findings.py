"""The findings of one audit, collected as the checks run, each naming the wheel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wheels.audit_report import Finding

if TYPE_CHECKING:
    from wheels.audit_report import Severity


class Findings:
    """The findings of one wheel's audit, in the order the checks make them."""

    def __init__(self, wheel: str) -> None:
        self.wheel = wheel
        self.items: list[Finding] = []

    def add(self, severity: Severity, code: str, member: str | None, message: str) -> None:
        self.items.append(Finding(severity, code, self.wheel, member, message))

    def violation(self, code: str, member: str | None, message: str) -> None:
        self.add("violation", code, member, message)

    def warning(self, code: str, member: str | None, message: str) -> None:
        self.add("warning", code, member, message)

    def error(self, code: str, member: str | None, message: str) -> None:
        """The audit's own failure: no verdict on the wheel."""
        self.add("error", code, member, message)
