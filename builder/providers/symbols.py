"""Which C++ functions a shared library exports, read in-process (no nm, readelf or c++filt).

A required symbol is given as c++filt prints it (``flash::mha_fwd(at::Tensor&, ...)``), as
upstream's resolve_linked_ops.py lists them. It is present when the library's ``.dynsym`` holds
a defined ``FUNC`` symbol with ``GLOBAL`` binding and ``DEFAULT`` visibility (upstream's readelf
filter; nm's ``--defined-only`` is implied) whose demangled name equals it, ignoring whitespace.
The table is read by :func:`wheels.elf.defined_functions`, and mangled names are demangled by
:mod:`builder.providers.demangle` (libstdc++'s own demangler); to keep this fast on libraries
with 100k symbols, only those containing the required function's own identifier as an Itanium
``<source-name>`` (``14mha_varlen_fwd``) are demangled: a function's final name is always
spelled out that way, never substituted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from builder.providers.demangle import Unsupported, demangle


class SymbolError(ValueError):
    """The file is not an ELF shared library whose dynamic symbols can be read."""


def exported_functions(path: Path) -> list[str]:
    """Raw names of the defined, global, default-visibility functions in ``.dynsym``."""
    from wheels.elf import ElfError, defined_functions

    try:
        return defined_functions(path)
    except (ElfError, OSError) as exc:
        raise SymbolError(f"cannot read the dynamic symbols of {path}: {exc}") from exc


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
    """The entries of ``required`` that ``path`` does not export (in their given order).

    Raises :class:`~builder.providers.demangle.Unavailable` when a C++ signature needs the
    demangler and this host has none.
    """
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
