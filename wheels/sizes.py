"""Sizes as stack.yaml and the command line give them, and PyPI's upload limit."""

from __future__ import annotations

import re

# PyPI's default upload limit per file (larger ones need a limit raised by request).
PYPI_MAX_SIZE = 100 * 1000 * 1000
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_SIZE = re.compile(r"(?i)\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*")


def parse_size(text: str) -> int:
    """``"100MB"`` -> 100000000, ``"95 MiB"`` -> 99614720, ``"1234"`` -> 1234 (bytes)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: '{text}' (e.g. 100MB, 95MiB, 2GB or a number of bytes)")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()])


def human_size(count: int) -> str:
    """``123456789`` -> ``123.5 MB``; decimal units, as PyPI states its limit."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
