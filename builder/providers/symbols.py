"""Which C++ functions a shared library exports, read in-process (no nm, readelf or c++filt).

A required symbol is given as c++filt prints it (``flash::mha_fwd(at::Tensor&, ...)``), as
upstream's resolve_linked_ops.py lists them. It is present when the library's ``.dynsym`` holds
a defined ``FUNC`` symbol with ``GLOBAL`` binding and ``DEFAULT`` visibility (upstream's readelf
filter; nm's ``--defined-only`` is implied) whose demangled name equals it, ignoring whitespace.
Mangled names are demangled by :mod:`builder.providers.demangle`; to keep this fast on libraries
with 100k symbols, only those containing the required function's own identifier as an Itanium
``<source-name>`` (``14mha_varlen_fwd``) are demangled: a function's final name is always
spelled out that way, never substituted.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from builder.providers.demangle import Unsupported, demangle

STT_FUNC = 2
STB_GLOBAL = 1
STV_DEFAULT = 0
SHN_UNDEF = 0


class SymbolError(ValueError):
    """The file is not an ELF shared library whose dynamic symbols can be read."""


def exported_functions(path: Path) -> list[str]:
    """Raw names of the defined, global, default-visibility functions in ``.dynsym``."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None:
                return []
            strtab = elf.get_section(dynsym["sh_link"])
            table, strings = dynsym.data(), strtab.data()
            return list(_functions(table, strings, elf.elfclass, elf.little_endian))
    except (ELFError, OSError, struct.error) as exc:
        raise SymbolError(f"cannot read the dynamic symbols of {path}: {exc}") from exc


def _functions(table: bytes, strings: bytes, elfclass: int, little: bool) -> Iterator[str]:
    order = "<" if little else ">"
    # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, ...
    layout, name_at, info_at, other_at, shndx_at = (
        (order + "IBBHQQ", 0, 1, 2, 3) if elfclass == 64 else (order + "IIIBBH", 0, 3, 4, 5)
    )
    for entry in struct.iter_unpack(
        layout, table[: len(table) - len(table) % struct.calcsize(layout)]
    ):
        info, other, shndx = entry[info_at], entry[other_at], entry[shndx_at]
        if (info & 0xF) != STT_FUNC or (info >> 4) != STB_GLOBAL:
            continue
        if (other & 0x3) != STV_DEFAULT or shndx == SHN_UNDEF:
            continue
        start = entry[name_at]
        end = strings.find(b"\0", start)
        yield strings[start:end].decode("utf-8", errors="replace")


def normalize(signature: str) -> str:
    return re.sub(r"\s+", "", signature)


def function_identifier(signature: str) -> str | None:
    """``ns::Cls<int>::fn[abi:cxx11](int)`` -> ``fn``; None for operators (no source-name)."""
    depth = 0
    name_end = len(signature)
    for i, ch in enumerate(signature):
        if ch in "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            name_end = i
            break
    name = signature[:name_end].strip()
    name = re.sub(r"\[abi:[^\]]*\]", "", name)
    while name.endswith(">"):  # drop trailing template arguments
        depth, i = 0, len(name) - 1
        while i >= 0:
            depth += {">": 1, "<": -1}.get(name[i], 0)
            if depth == 0:
                break
            i -= 1
        name = name[:i].rstrip()
    last = name.rsplit("::", 1)[-1].split()[-1] if name else ""
    last = last.lstrip("~")
    return last if re.fullmatch(r"[A-Za-z_]\w*", last) and not last.startswith("operator") else None


def missing_symbols(path: Path, required: Sequence[str]) -> list[str]:
    """The entries of ``required`` that ``path`` does not export (in their given order)."""
    exported = exported_functions(path)
    plain = set(exported)
    missing = []
    for signature in required:
        if signature in plain:  # a C symbol, or a mangled name given as such
            continue
        if not any(_matches(signature, name) for name in _candidates(signature, exported)):
            missing.append(signature)
    return missing


def _candidates(signature: str, exported: Iterable[str]) -> Iterator[str]:
    ident = function_identifier(signature)
    marker = f"{len(ident)}{ident}" if ident else None
    for name in exported:
        if name.startswith("_Z") and (marker is None or marker in name):
            yield name


def _matches(signature: str, mangled: str) -> bool:
    try:
        return normalize(demangle(mangled)) == normalize(signature)
    except Unsupported:
        return False
