"""A wheel's file name read as packaging reads it, without importing packaging.tags (which
imports platform, sysconfig, subprocess and logging: more than reading a small wheel costs).

:func:`parse_wheel_filename` and :func:`canonicalize_name` mirror packaging 26's
``packaging.utils``; tests/unit/test_naming.py holds them equal to packaging's own.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version


class InvalidWheelName(ValueError):
    """A file name that is not a wheel's, as packaging's InvalidWheelFilename."""


def canonicalize_name(name: str) -> str:
    """``My_Pkg.x`` -> ``my-pkg-x``: packaging.utils.canonicalize_name (PEP 503), mirrored so that
    reading a wheel's name does not import packaging.tags (platform, sysconfig, logging, ...)."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value


_WHEEL_NAME = re.compile(r"^[\w._]+\Z", re.UNICODE)
_BUILD_TAG = re.compile(r"(\d+)(.*)\Z", re.ASCII)

Tag = tuple[str, str, str]  # interpreter, abi, platform, lowercase as packaging.tags.Tag has them


def parse_wheel_filename(filename: str) -> tuple[str, Version, tuple[int, str] | None, set[Tag]]:
    """(canonical name, version, build tag, tags) of a wheel's file name; InvalidWheelName when it
    is none. packaging.utils.parse_wheel_filename (packaging 26), mirrored as
    :func:`canonicalize_name` is; tests/unit/test_naming.py holds the two equal."""
    if not filename.endswith(".whl"):
        raise InvalidWheelName(f"Invalid wheel filename (extension must be '.whl'): {filename!r}")
    stem = filename[:-4]
    dashes = stem.count("-")
    if dashes not in (4, 5):
        raise InvalidWheelName(f"Invalid wheel filename (wrong number of parts): {stem!r}")
    parts = stem.split("-", dashes - 2)
    if "__" in parts[0] or _WHEEL_NAME.match(parts[0]) is None:
        raise InvalidWheelName(f"Invalid project name: {stem!r}")
    try:
        version = Version(parts[1])
    except InvalidVersion:
        raise InvalidWheelName(f"Invalid wheel filename (invalid version): {stem!r}") from None
    build = None
    if dashes == 5:
        match = _BUILD_TAG.match(parts[2])
        if match is None:
            raise InvalidWheelName(f"Invalid build number: {parts[2]} in {stem!r}")
        build = (int(match.group(1)), match.group(2))
    components = [c.split(".") for c in parts[-1].split("-")]
    if len(components) != 3 or any("" in c for c in components):
        raise InvalidWheelName(f"Invalid wheel filename (invalid tag component): {stem!r}")
    if not all(i.isidentifier() for i in components[0]):
        raise InvalidWheelName(f"Invalid wheel filename (invalid tag component): {stem!r}")
    tags = {
        (i.lower(), a.lower(), p.lower())
        for i in components[0]
        for a in components[1]
        for p in components[2]
    }
    return canonicalize_name(parts[0]), version, build, tags
