"""The dynamic symbol table: what an ELF file exports, what it leaves undefined, with versions.

pyelftools builds one object per symbol, which is far too slow for the 75,000 exported symbols
of a 434 MB library; ``struct.iter_unpack`` over the table is not.

Measured and left: reading the table by columns (strided slices of its bytes, masks combined as
integers). The names are what cost: for the 75,415 symbols of torch 2.13's ``libtorch_cpu.so``
(5.2 MB of strings) the whole scan below takes 54 ms, of which finding each name's end takes
23 ms and slicing it out 27 ms; the offsets by columns take 2.7 ms, but splitting the string
table and mapping offsets to its parts takes 63 ms (split 15, offsets 7, dict 15, lookups 33).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wheels.elf.reader import (
    ElfError,
    Reader,
    Section,
    linked_strtab,
    opened,
    string_at,
    unsigned_words,
)
from wheels.elf.versions import Versions

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from wheels.elf.reader import Data

SHT_GNU_VERSYM = 0x6FFFFFFF
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_NOTYPE, _STT_FUNC, _STT_SECTION, _STT_FILE = 0, 2, 3, 4
VERSYM_HIDDEN = 0x8000
_PYFPE = frozenset({"PyFPE_jbuf", "PyFPE_dummy", "PyFPE_counter"})
_ENTRY_PREFIXES = ("PyInit_", "init", "_cffi_pypyinit_")


EXPORT_CHUNK = 4096  # exported names joined this many at a time (see Symbols.export_names)


@dataclass
class Symbols:
    """The dynamic symbols of one ELF file, sorted the ways the audit asks.

    The exported names are kept NUL-joined in chunks (``joined``, then the last few in
    ``exports``), never all as objects of their own, and each one's version as a number
    (``versions``: its index among the version definitions, 0 when it has none), not as a
    ``name@version`` string: TensorFlow 2.21's ``libtensorflow_cc.so.2`` exports 435,000
    versioned names (80 MB), which as a list and a set of ``name@version`` cost 210 MB more.
    """

    exports: list[str]
    hidden_versioned: set[str]  # ``name@version`` of the hidden definitions that have one
    versions: list[int]
    undefined: list[str]
    undefined_versions: list[str]
    undefined_weak: list[str]
    entry_points: set[str]
    uses_pyfpe: bool = False
    uses_ucs2: bool = False
    joined: list[str] = field(default_factory=list)

    def add_export(self, name: str, version: int) -> None:
        self.exports.append(name)
        self.versions.append(version)
        if len(self.exports) >= EXPORT_CHUNK:
            self.joined.append("\0".join(self.exports))
            self.exports.clear()

    def export_names(self) -> str:
        """Every exported name, NUL-separated, in the table's order."""
        if self.exports:
            self.joined.append("\0".join(self.exports))
            self.exports.clear()
        return self.joined[0] if len(self.joined) == 1 else "\0".join(self.joined)

    def export_versions(self) -> str:
        """Each exported name's version index as one character (ElfInfo.export_versions)."""
        return "".join(map(chr, self.versions))


def read_symbols(
    r: Reader,
    sections: Sequence[Section],
    dynsym: Section | None,
    table: str | None,
    versions: Versions,
) -> Symbols:
    """The dynamic symbols; ``table`` is the string table ``dynsym`` links to."""
    out = Symbols([], set(), [], [], [], [], set())
    if dynsym is None or table is None:
        return out
    count, rows = _rows(r, dynsym)
    versym = read_versym(r, sections, count)
    versions_or_zero = versym if versym is not None else (0,) * count
    _scan_symbols(out, table, rows, versions_or_zero, versions)
    return out


def exported(info: int, other: int, shndx: int) -> bool:
    """Is a dynamic symbol of these fields a definition the file exports: defined, global or
    weak, neither a section nor a file, of default or protected visibility? (The scan below
    tests the same, inline.)"""
    kind = info & 0xF
    return (
        shndx != 0
        and info >= 0x10
        and kind not in (_STT_SECTION, _STT_FILE)
        and other & 3 not in (1, 2)
    )


def _rows(r: Reader, dynsym: Section) -> tuple[int, Iterator[tuple[int, ...]]]:
    """The number of symbols, and each as (name, info, other, shndx, value, size)."""
    fmt = r.layout.fmt("IIIBBH", "IBBHQQ")
    count = dynsym.size // fmt.size
    rows = fmt.iter_unpack(r.span(dynsym.offset, count * fmt.size, "dynamic symbol table"))
    if r.cls == 32:
        rows = ((n, i, o, x, v, z) for n, v, z, i, o, x in rows)  # to the 64-bit field order
    return count, rows


def defined_functions(source: Data | Path) -> list[str]:
    """Names of the functions ``.dynsym`` defines with GLOBAL binding and DEFAULT visibility
    (readelf's view of what a library exports to C++ callers); [] when there is no ``.dynsym``.

    Raises :class:`ElfError` when ``source`` is not a readable ELF file, OSError when a path
    cannot be opened.
    """
    with opened(source) as image:
        dynsym = image.section_named(".dynsym")
        if dynsym is None:
            return []
        r = image.reader
        table = linked_strtab(r, image.sections, dynsym)
        return [
            _utf8(string_at(table, name)) if name else ""
            for name, info, other, shndx, _, _ in _rows(r, dynsym)[1]
            if info & 0xF == _STT_FUNC and info >> 4 == _STB_GLOBAL and not other & 3 and shndx
        ]


def _utf8(name: str) -> str:
    # The string table was read as latin-1, one character per byte; C++ names are UTF-8.
    return name if name.isascii() else name.encode("latin-1").decode("utf-8", "replace")


def _scan_symbols(
    out: Symbols,
    table: str,
    rows: Iterator[tuple[int, ...]],
    versym: Sequence[int],
    versions: Versions,
) -> None:
    # The hot loop of the whole audit (75,000 rows for libtorch_cpu): keep lookups local.
    size, find = len(table), table.find
    need_names, def_names = versions.need_by_index, versions.def_by_index
    add_export, entry_points = out.add_export, out.entry_points
    skip = (_STT_SECTION, _STT_FILE)
    for (name_off, info, other, shndx, _, _), ver in zip(rows, versym, strict=True):
        if name_off == 0:
            continue
        if name_off >= size:
            raise ElfError(f"symbol name offset {name_off} lies beyond the string table")
        end = find("\0", name_off)
        name = table[name_off:end] if end >= 0 else table[name_off:]
        if shndx == 0:
            _add_undefined(out, name, info >> 4, info & 0xF, need_names.get(ver & 0x7FFF, ""))
            continue
        if info < 0x10 or (info & 0xF) in skip or other & 3 in (1, 2):
            continue  # local binding, section or file symbol, hidden or internal (exported())
        if info & 0xF == _STT_FUNC and name.startswith(_ENTRY_PREFIXES):
            entry_points.add(name)
        index = ver & 0x7FFF
        versioned = index >= 2 and index in def_names
        if not ver & VERSYM_HIDDEN:
            add_export(name, index if versioned else 0)
        elif versioned:
            out.hidden_versioned.add(f"{name}@{def_names[index]}")


def _add_undefined(out: Symbols, name: str, bind: int, kind: int, version: str) -> None:
    if name in _PYFPE and kind in (_STT_FUNC, _STT_NOTYPE):
        out.uses_pyfpe = True
    if kind == _STT_FUNC and "PyUnicodeUCS2_" in name:
        out.uses_ucs2 = True
    if bind == _STB_WEAK:
        out.undefined_weak.append(name)
    else:
        out.undefined.append(name)
        out.undefined_versions.append(version)


def read_versym(r: Reader, sections: Sequence[Section], count: int) -> Sequence[int] | None:
    """Each symbol's version index; 0 for those past the end of a short table."""
    sec = next((s for s in sections if s.sh_type == SHT_GNU_VERSYM), None)
    if sec is None:
        return None
    n = min(count, sec.size // 2)
    data = bytes(r.span(sec.offset, n * 2, "symbol version table")) + bytes(2 * (count - n))
    return unsigned_words(data, "H", r.little)
