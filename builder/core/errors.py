"""One error family for everything a user can cause; the CLI alone turns it into an exit code."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from builder.core.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_MANIFEST = 2
EXIT_PREFLIGHT = 3
EXIT_SOURCES = 4
EXIT_BUILD = 5
EXIT_AUDIT = 6
EXIT_CHECK = 7  # the vendor's runtime check of the installed wheel failed


class StackError(Exception):
    """A failure with a message for people and an exit code for machines."""

    exit_code: int = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        message = redact(message)  # no credential of a URL ever reaches a terminal or a report
        super().__init__(message)
        self.message = message
        self.hint = redact(hint) if hint else hint

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class UsageError(StackError):
    exit_code = EXIT_USAGE


class ManifestError(StackError):
    """Every problem found in a manifest or recipe, each already located as FILE:LINE:COL."""

    exit_code = EXIT_MANIFEST

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(redact(p) for p in problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the manifest"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))

    def render(self) -> str:
        return "\n".join(self.problems) + f"\nerror: {len(self.problems)} manifest problem(s)"


class PreflightError(StackError):
    exit_code = EXIT_PREFLIGHT


class SourceError(StackError):
    exit_code = EXIT_SOURCES


class BuildError(StackError):
    exit_code = EXIT_BUILD


class CheckError(StackError):
    exit_code = EXIT_CHECK


class AuditError(StackError):
    exit_code = EXIT_AUDIT


class CommandFailed(StackError):
    """A child process exited non-zero; carries what a person needs to act on it."""

    exit_code = EXIT_BUILD

    def __init__(
        self,
        what: str,
        argv: Sequence[str],
        returncode: int,
        tail: str,
        log: Path | None,
        *,
        exit_code: int = EXIT_BUILD,
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.tail = redact(tail)
        self.log = log
        self.exit_code = exit_code
        lines = [f"{what} failed (exit status {returncode})", "  command: " + _quote(argv)]
        if tail:
            lines.append("  last lines of output:")
            lines.extend("    | " + line for line in tail.splitlines())
        if log is not None:
            lines.append(f"  full log: {log}")
        super().__init__("\n".join(lines))


def _quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
