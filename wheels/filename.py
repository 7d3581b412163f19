"""A wheel's file name read as packaging reads it, without importing packaging.tags (which
imports platform, sysconfig, subprocess and logging: more than reading a small wheel costs).

:func:`parse_wheel_filename` and :func:`canonicalize_name` mirror packaging 26's
``packaging.utils``; tests/unit/test_naming.py holds them equal to packaging's own. Versions
already in packaging's normal form with only a release and a local label (``2.13.0``,
``0.1.0+cpu``), nearly every wheel's, are read here (:func:`normalized_version`,
:func:`same_version`); any other goes to ``packaging.version``, whose import (it brings
``typing``) takes 3.7 ms, a twentieth of a small wheel's audit.
"""

from __future__ import annotations

from wheels.matching import lazy


class InvalidWheelName(ValueError):
    """A file name that is not a wheel's, as packaging's InvalidWheelFilename."""


def canonicalize_name(name: str) -> str:
    """``My_Pkg.x`` -> ``my-pkg-x``: packaging.utils.canonicalize_name (PEP 503), mirrored so that
    reading a wheel's name does not import packaging.tags (platform, sysconfig, logging, ...)."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value


# A version already in packaging's normal form, ASCII: (?:0|[1-9][0-9]*) parts joined by ".",
# then optionally "+" and local labels (?:0|[1-9][0-9]*|[0-9]*[a-z][a-z0-9]*) joined by ".".
# Tested as strings (wheels.matching says why); tests/unit/test_matching.py holds them to that.
_LOWER_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


def is_normal(text: str) -> bool:
    """Is ``text`` a version in packaging's normal form (a release, an optional local part)?"""
    release, plus, local = text.partition("+")
    if not all(_number(part) for part in release.split(".")):
        return False
    return not plus or all(_label(part) for part in local.split("."))


def _number(part: str) -> bool:
    return part.isascii() and part.isdigit() and (part == "0" or part[0] != "0")


def _label(part: str) -> bool:
    if part.isascii() and part.isdigit():
        return _number(part)
    return bool(part) and all(c in _LOWER_ALNUM for c in part)


def normalized_version(text: str) -> str:
    """``str(packaging.version.Version(text))``; packaging's InvalidVersion (a ValueError) when
    packaging refuses ``text``."""
    if is_normal(text):
        return text
    from packaging.version import Version

    return str(Version(text))


def same_version(a: str, b: str) -> bool:
    """``Version(a) == Version(b)`` as packaging compares them; False when either is invalid."""
    if is_normal(a) and is_normal(b):
        return _normal_key(a) == _normal_key(b)
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


def _normal_key(normal: str) -> tuple[str, str]:
    """What packaging compares a normal-form version by: its release without trailing zeros
    (``1.0`` is ``1``), and its local label (``cpu``, or empty)."""
    release, _, local = normal.partition("+")
    while release.endswith(".0"):
        release = release[:-2]
    return release, local


_BUILD_TAG = lazy(r"(?a)(\d+)(.*)\Z")


def is_wheel_name(text: str) -> bool:
    """Does ``text`` match packaging's ``^[\\w._]+\\Z`` for a wheel's name part (re.UNICODE: a
    ``\\w`` is what str.isalnum takes, or ``_``)?"""
    return bool(text) and all(c.isalnum() or c in "._" for c in text)


Tag = tuple[str, str, str]  # interpreter, abi, platform, lowercase as packaging.tags.Tag has them


def parse_wheel_filename(filename: str) -> tuple[str, str, tuple[int, str] | None, set[Tag]]:
    """(canonical name, normalized version, build tag, tags) of a wheel's file name;
    InvalidWheelName when it is none. packaging.utils.parse_wheel_filename (packaging 26),
    mirrored as :func:`canonicalize_name` is, but for the version, a normalized string here;
    tests/unit/test_naming.py holds the two equal."""
    if not filename.endswith(".whl"):
        raise InvalidWheelName(f"Invalid wheel filename (extension must be '.whl'): {filename!r}")
    stem = filename[:-4]
    dashes = stem.count("-")
    if dashes not in (4, 5):
        raise InvalidWheelName(f"Invalid wheel filename (wrong number of parts): {stem!r}")
    parts = stem.split("-", dashes - 2)
    if "__" in parts[0] or not is_wheel_name(parts[0]):
        raise InvalidWheelName(f"Invalid project name: {stem!r}")
    try:
        version = normalized_version(parts[1])
    except ValueError:  # packaging's InvalidVersion
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
