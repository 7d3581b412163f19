"""Requires-Dist lines, read by ``packaging.requirements``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.requirements import Requirement


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
    """One Requires-Dist value; raises :class:`InvalidRequires` when packaging rejects it.
    packaging's requirement parser is loaded by the first line read: a wheel that requires
    nothing does not load it."""
    from packaging.requirements import InvalidRequirement

    try:
        return Requires(_parse(value).name, value.strip())
    except InvalidRequirement as exc:
        raise InvalidRequires(str(exc)) from None


@cache
def _parse(text: str) -> Requirement:
    from packaging.requirements import Requirement

    return Requirement(text)
