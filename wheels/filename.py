"""A wheel's file name and its version, read by ``packaging.utils`` and ``packaging.version``."""

from __future__ import annotations

from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.utils import parse_wheel_filename as _parse_wheel_filename
from packaging.version import InvalidVersion, Version

__all__ = [
    "InvalidWheelName",
    "Tag",
    "canonicalize_name",
    "normalized_version",
    "parse_wheel_filename",
    "same_version",
]


class InvalidWheelName(ValueError):
    """A file name that is not a wheel's (packaging's InvalidWheelFilename, its message)."""


def normalized_version(text: str) -> str:
    """``str(Version(text))``; packaging's InvalidVersion (a ValueError) when it refuses it."""
    return str(Version(text))


def same_version(a: str, b: str) -> bool:
    """``Version(a) == Version(b)``; False when either is invalid."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


Tag = tuple[str, str, str]  # interpreter, abi, platform, lowercase as packaging.tags.Tag has them


def parse_wheel_filename(filename: str) -> tuple[str, str, tuple[int, str] | None, set[Tag]]:
    """(canonical name, normalized version, build tag, tags) of a wheel's file name, as
    ``packaging.utils.parse_wheel_filename`` reads it; InvalidWheelName when it is none."""
    try:
        name, version, build, tags = _parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise InvalidWheelName(str(exc)) from None
    triples = {(t.interpreter, t.abi, t.platform) for t in tags}
    return str(name), str(version), (build[0], build[1]) if build else None, triples
