"""What auditwheel reads from one ELF file beyond its dependencies (mirrors
``auditwheel/elfutils.py``): Python entry points, versioned-symbol needs, blacklisted symbols."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from wheels.elf import ElfInfo

if TYPE_CHECKING:
    from collections.abc import Mapping


def python_extension(path: str, info: ElfInfo) -> int | None:
    """auditwheel's elf_is_python_extension: 3 for PyInit_<mod>, 2 for the old entry points."""
    if not info.has_symbols:
        return None
    mod = posixpath.basename(path).split(".", 1)[0]
    if f"PyInit_{mod}" in info.entry_points:
        return 3
    if f"init{mod}" in info.entry_points or f"_cffi_pypyinit_{mod}" in info.entry_points:
        return 2
    return None


def add_version_needs(into: dict[str, set[str]], info: ElfInfo) -> None:
    """auditwheel's versioned-symbol requirements of one ELF, the dynamic loader's left out."""
    for need in info.version_needs:
        if not (need.file.startswith("ld-linux") or need.file in ("ld64.so.2", "ld64.so.1")):
            into.setdefault(need.file, set()).update(need.versions)


def blacklisted(info: ElfInfo, symbols: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    if not symbols:
        return {}
    found: dict[str, list[str]] = {}
    for lib, syms in symbols.items():
        hit = syms.intersection(info.undefined)  # (no set of all the undefined names made)
        if "*" in syms:
            hit |= {"*"}
        if hit:
            found[lib] = sorted(hit)
    return found
