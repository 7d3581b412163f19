"""Requires-Dist lines, read by ``packaging.requirements``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from packaging.requirements import InvalidRequirement, Requirement


class InvalidRequires(ValueError):
    """A Requires-Dist line packaging rejects; the message is packaging's."""


@dataclass(frozen=True, slots=True)
class Requires:
    """One Requires-Dist line: its distribution's name as written, and the line."""

    name: str
    text: str

    def parsed(self) -> Requirement:
        """The line as packaging reads it."""
        return _parse(self.text)


def read_requires(value: str) -> Requires:
    """One Requires-Dist value; raises :class:`InvalidRequires` when packaging rejects it."""
    try:
        return Requires(_parse(value).name, value.strip())
    except InvalidRequirement as exc:
        raise InvalidRequires(str(exc)) from None


@cache
def _parse(text: str) -> Requirement:
    return Requirement(text)
