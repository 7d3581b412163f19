"""What a wheel is made of: the manifest's ``wheel`` section, as the assembler reads it."""

from __future__ import annotations

from dataclasses import dataclass


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
    # The CPython versions (X.Y) a release makes a wheel for (release --python wins); empty:
    # the interpreter the tool runs under.
    pythons: tuple[str, ...] = ()
