"""What a wheel is made of: the manifest's ``wheel`` section, as the assembler reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class WheelSpec:
    name: str
    version: str
    component: str  # whose install tree holds the Python packages
    python_dir: str  # relative to that component's prefix
    packages: tuple[str, ...]
    library_dir: str  # inside the wheel, where bundled shared libraries go
    bundle: tuple[str, ...]  # components whose lib/*.so* are bundled
    requires: tuple[str, ...]
    requires_python: str
    summary: str
    variant: bool = False  # also write the PEP 825 variant wheel (builder/pipeline/variant.py)
    max_size: int | None = None  # bytes; a larger wheel fails its audit (None: PyPI's, a warning)


def parse_size(text: str) -> int:
    """``"100MB"`` -> 100000000, ``"95 MiB"`` -> 99614720, ``"1234"`` -> 1234 (bytes)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: '{text}' (e.g. 100MB, 95MiB, 2GB or a number of bytes)")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()])
