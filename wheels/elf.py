"""Read what the dynamic loader reads from an ELF file, in process, from bytes in memory.

Only the few tables an audit needs are decoded: program headers, the dynamic segment, the dynamic
symbol table with its string table, the GNU version tables and the GNU property notes. Every
offset and count is checked against the buffer, so garbage raises :class:`ElfError` (and nothing
else). pyelftools builds one object per symbol, which is far too slow for the 75,000 exported
symbols of a 434 MB library; ``struct.iter_unpack`` over the table is not.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

ELF_MAGIC = b"\x7fELF"

# e_machine values and the wheel architecture they mean (auditwheel.lddtree._get_platform).
_ARCH_BY_MACHINE: Mapping[tuple[int, int, bool], str] = {
    (3, 32, True): "i686",
    (62, 64, True): "x86_64",
    (21, 64, True): "ppc64le",
    (21, 64, False): "ppc64",
    (243, 64, True): "riscv64",
    (183, 64, True): "aarch64",
    (22, 64, False): "s390x",
    (40, 32, True): "armv7l",
    (258, 64, True): "loongarch64",
}
_EF_ARM_EABIMASK = 0xFF000000
_EF_ARM_EABI_VER5 = 0x05000000
_EF_ARM_ABI_FLOAT_HARD = 0x00000400

_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_SHT_NOTE, _SHT_DYNSYM = 7, 11
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED, _SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ = 0, 1, 5, 10
_DT_SONAME, _DT_RPATH, _DT_RUNPATH = 14, 15, 29
_NT_GNU_PROPERTY_TYPE_0 = 5
_GNU_PROPERTY_X86_ISA_1_NEEDED = 0xC0008002
_STB_LOCAL, _STB_WEAK = 0, 2
_STT_FUNC, _STT_SECTION, _STT_FILE = 2, 3, 4
_STT_NOTYPE = 0
_VERSYM_HIDDEN = 0x8000
_MAX_STRING = 1 << 16
_PYFPE = frozenset({"PyFPE_jbuf", "PyFPE_dummy", "PyFPE_counter"})
_ENTRY_PREFIXES = ("PyInit_", "init", "_cffi_pypyinit_")


class ElfError(Exception):
    """Bytes that start like an ELF file (or are named like one) but cannot be read as one."""


@dataclass(frozen=True)
class VersionNeed:
    """One DT_VERNEED entry: versions this object needs from the library named ``file``."""

    file: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class ElfInfo:
    """What the loader and an audit need to know about one ELF file."""

    elf_class: int
    little_endian: bool
    machine: int
    osabi: int
    elf_type: int
    arch: str | None
    arch_error: str | None
    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    has_symbols: bool
    has_versym: bool
    export_names: str  # names of non-hidden definitions, NUL-separated (see ``exports``)
    exports_versioned: frozenset[str]
    exports_unversioned: frozenset[str] | None
    undefined: tuple[str, ...]
    undefined_versions: tuple[str, ...]
    undefined_weak: tuple[str, ...]
    entry_points: frozenset[str]
    uses_pyfpe: bool
    uses_ucs2: bool
    isa_ext: str | None
    isa_error: bool

    def __reduce__(self) -> tuple[Callable[..., ElfInfo], tuple[object, ...]]:
        # Pickling 100,000 symbol names one by one is slow: ship each set as one NUL-joined
        # string (a name cannot hold NUL: string tables end names with it).
        values = tuple(
            ("\0".join(v), type(v) is frozenset, len(v)) if _is_strings(v) else (v, None, 0)
            for v in (getattr(self, name) for name in self.__dataclass_fields__)
        )
        return _unpack_info, (values,)

    @functools.cached_property
    def exports(self) -> frozenset[str]:
        """Built on first use: most ELFs' tens of thousands of names are never looked up."""
        return frozenset(self.export_names.split("\0")) if self.export_names else frozenset()

    @property
    def export_count(self) -> int:
        return self.export_names.count("\0") + 1 if self.export_names else 0

    def exported_like(self, pattern: re.Pattern[str]) -> list[str]:
        """Exported names matched by ``pattern``, which starts with the separator NUL."""
        return [m.group(1) for m in pattern.finditer("\0" + self.export_names)]

    @property
    def platform(self) -> tuple[bool, int, bool, int]:
        """Loader compatibility key: auditwheel treats ELFOSABI_NONE/SYSV and GNU/LINUX alike."""
        return (self.osabi in (0, 3), self.elf_class, self.little_endian, self.machine)

    def is_compatible(self, other: ElfInfo) -> bool:
        same_abi = self.osabi == other.osabi or (self.osabi in (0, 3) and other.osabi in (0, 3))
        return same_abi and self.platform[1:] == other.platform[1:]

    def defines(self, name: str, version: str) -> bool:
        """Would the loader bind a reference ``name`` (needing ``version``, or none) here?"""
        if not version or not self.has_versym:
            return name in self.exports
        if f"{name}@{version}" in self.exports_versioned:
            return True
        plain = self.exports if self.exports_unversioned is None else self.exports_unversioned
        return name in plain

    def split_path(self, which: str) -> tuple[str, ...]:
        value = self.runpath if which == "runpath" else self.rpath
        return tuple(value.split(":")) if value is not None else ()


def _is_strings(value: object) -> bool:
    return isinstance(value, (frozenset, tuple)) and all(type(v) is str for v in value)


def _unpack_info(values: tuple[tuple[object, bool | None, int], ...]) -> ElfInfo:
    fields: list[object] = []
    for value, as_set, count in values:
        if as_set is None:
            fields.append(value)
        else:
            items = str(value).split("\0") if count else []
            fields.append(frozenset(items) if as_set else tuple(items))
    build: Callable[..., ElfInfo] = ElfInfo
    return build(*fields)


@dataclass(frozen=True)
class _Layout:
    """Struct formats for one ELF class and byte order."""

    cls: int
    end: str

    def fmt(self, spec32: str, spec64: str) -> struct.Struct:
        return struct.Struct(self.end + (spec64 if self.cls == 64 else spec32))


class ByteSource(Protocol):
    """Random access to the bytes of one file that need not all be in memory at once."""

    @property
    def size(self) -> int: ...

    def range(self, offset: int, size: int) -> memoryview: ...

    def head(self, size: int) -> bytes: ...


class Chunks:
    """Bytes held as the consecutive parts an inflater produced, read without joining them all.

    Joining the parts of a 434 MB library would cost a copy of all of it; the reader only ever
    needs a few small ranges, and a range that crosses parts is joined on its own.
    """

    def __init__(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
        self.parts: list[memoryview] = [memoryview(p).cast("B") for p in parts if len(p)]
        self.starts: list[int] = []
        total = 0
        for part in self.parts:
            self.starts.append(total)
            total += len(part)
        self.size = total

    def range(self, offset: int, size: int) -> memoryview:
        if size <= 0:
            return memoryview(b"")
        i = bisect.bisect_right(self.starts, offset) - 1
        inner = offset - self.starts[i]
        part = self.parts[i]
        if inner + size <= len(part):
            view: memoryview = part[inner : inner + size]
            return view
        j = bisect.bisect_left(self.starts, offset + size)
        return memoryview(b"".join(self.parts[i:j]))[inner : inner + size]

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))


class _Reader:
    """Bounds-checked access to the bytes of one ELF file."""

    def __init__(self, data: bytes | bytearray | memoryview | ByteSource) -> None:
        self.data = Chunks([data]) if isinstance(data, (bytes, bytearray, memoryview)) else data
        self.size = self.data.size
        self._strings: dict[tuple[int, int], str] = {}
        ident = self.data.head(16)
        if self.size < 52 or ident[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file (bad magic or shorter than an ELF header)")
        ei_class, ei_data = ident[4], ident[5]
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            raise ElfError(f"bad ELF identification (class {ei_class}, data {ei_data})")
        self.cls = 32 if ei_class == 1 else 64
        self.little = ei_data == 1
        self.layout = _Layout(self.cls, "<" if self.little else ">")
        self.osabi = ident[7]

    def span(self, offset: int, size: int, what: str) -> memoryview:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(f"{what} at offset {offset} size {size} lies outside the file")
        return self.data.range(offset, size)

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        values: tuple[int, ...] = fmt.unpack(self.span(offset, fmt.size, what))
        return values

    def strings(self, offset: int, size: int, what: str) -> str:
        # latin-1 keeps one character per byte, so string offsets stay valid in the text.
        key = (offset, size)
        if key not in self._strings:
            self._strings[key] = bytes(self.span(offset, size, what)).decode("latin-1")
        return self._strings[key]


@dataclass(frozen=True)
class _Header:
    elf_type: int
    machine: int
    flags: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int


@dataclass(frozen=True)
class _Section:
    sh_type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class _Segment:
    p_type: int
    offset: int
    vaddr: int
    filesz: int


def _read_header(r: _Reader) -> _Header:
    fmt = r.layout.fmt("HHIIIIIHHHHHH", "HHIQQQIHHHHHH")
    (e_type, machine, _ver, _entry, phoff, shoff, flags, _ehsize, phentsize, phnum, shentsize,
     shnum, _shstrndx) = r.unpack(fmt, 16, "ELF header")  # fmt: skip
    if phnum and phentsize != (32 if r.cls == 32 else 56):
        raise ElfError(f"bad program header entry size {phentsize}")
    if shnum and shentsize != (40 if r.cls == 32 else 64):
        raise ElfError(f"bad section header entry size {shentsize}")
    return _Header(e_type, machine, flags, phoff, shoff, phentsize, phnum, shentsize, shnum)


def _segments(r: _Reader, h: _Header) -> list[_Segment]:
    if h.phnum == 0:
        return []
    r.span(h.phoff, h.phnum * h.phentsize, "program header table")
    out: list[_Segment] = []
    if r.cls == 64:
        fmt = r.layout.fmt("", "IIQQQQQQ")
        for i in range(h.phnum):
            p_type, _fl, off, vaddr, _pa, filesz, _msz, _al = r.unpack(fmt, h.phoff + i * 56, "")
            out.append(_Segment(p_type, off, vaddr, filesz))
    else:
        fmt = r.layout.fmt("IIIIIIII", "")
        for i in range(h.phnum):
            p_type, off, vaddr, _pa, filesz, _msz, _fl, _al = r.unpack(fmt, h.phoff + i * 32, "")
            out.append(_Segment(p_type, off, vaddr, filesz))
    return out


def _sections(r: _Reader, h: _Header) -> list[_Section]:
    shnum = h.shnum
    if h.shoff == 0:
        return []
    fmt = r.layout.fmt("IIIIIIIIII", "IIQQQQIIQQ")
    if shnum == 0:
        # Extended numbering: the real count sits in section 0's sh_size.
        first = r.unpack(fmt, h.shoff, "section header 0")
        shnum = first[5]
        if shnum == 0:
            return []
    r.span(h.shoff, shnum * fmt.size, "section header table")
    out: list[_Section] = []
    for i in range(shnum):
        _nm, sh_type, _fl, _addr, off, size, link, _info, _al, entsize = r.unpack(
            fmt, h.shoff + i * fmt.size, "section header"
        )
        out.append(_Section(sh_type, off, size, link, entsize))
    return out


def _string_at(table: str, offset: int) -> str:
    if offset >= len(table):
        raise ElfError(f"string offset {offset} beyond a string table of {len(table)} bytes")
    end = table.find("\0", offset, offset + _MAX_STRING)
    if end < 0:
        raise ElfError(f"unterminated string at offset {offset}")
    return table[offset:end]


def _vaddr_to_offset(segments: Sequence[_Segment], vaddr: int) -> int | None:
    for seg in segments:
        if seg.p_type == _PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return seg.offset + vaddr - seg.vaddr
    return None


@dataclass(frozen=True)
class _Dynamic:
    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None


def _read_dynamic(
    r: _Reader, segments: Sequence[_Segment], sections: Sequence[_Section]
) -> _Dynamic:
    interpreter: str | None = None
    for seg in segments:
        if seg.p_type == _PT_INTERP:
            raw = bytes(r.span(seg.offset, seg.filesz, "PT_INTERP"))
            interpreter = raw.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
            break
    dyn = next((s for s in segments if s.p_type == _PT_DYNAMIC), None)
    if dyn is None:
        return _Dynamic(interpreter, None, (), None, None)
    fmt = r.layout.fmt("iI", "qQ")
    r.span(dyn.offset, dyn.filesz, "dynamic segment")
    tags: list[tuple[int, int]] = []
    for i in range(dyn.filesz // fmt.size):
        tag, val = r.unpack(fmt, dyn.offset + i * fmt.size, "dynamic entry")
        if tag == _DT_NULL:
            break
        tags.append((tag, val))
    strtab_addr = next((v for t, v in tags if t == _DT_STRTAB), None)
    strsz = next((v for t, v in tags if t == _DT_STRSZ), None)
    table = _dynamic_strtab(r, segments, sections, strtab_addr, strsz)
    named = (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH)
    if table is None and any(t in named for t, _ in tags):
        raise ElfError("dynamic segment names libraries but has no readable DT_STRTAB")

    def text(tag: int) -> str | None:
        vals = [v for t, v in tags if t == tag]
        return _string_at(table, vals[0]) if vals and table is not None else None

    needed = tuple(_string_at(table, v) for t, v in tags if t == _DT_NEEDED and table is not None)
    return _Dynamic(interpreter, text(_DT_SONAME), needed, text(_DT_RPATH), text(_DT_RUNPATH))


def _dynamic_strtab(
    r: _Reader,
    segments: Sequence[_Segment],
    sections: Sequence[_Section],
    addr: int | None,
    size: int | None,
) -> str | None:
    if addr is None:
        return None
    offset = _vaddr_to_offset(segments, addr)
    if offset is None:
        return None
    if size is None or offset + size > r.size:
        # Fall back to the section at that offset, as pyelftools does.
        sec = next((s for s in sections if s.offset == offset), None)
        if sec is None:
            raise ElfError("DT_STRTAB without a usable DT_STRSZ")
        size = sec.size
    return r.strings(offset, size, "dynamic string table")


@dataclass(frozen=True)
class _Versions:
    needs: tuple[VersionNeed, ...]
    need_by_index: dict[int, str]
    defs: tuple[str, ...]
    def_by_index: dict[int, str]


def _read_verneed(
    r: _Reader, sec: _Section, table: str
) -> tuple[list[VersionNeed], dict[int, str]]:
    vn = r.layout.fmt("HHIII", "HHIII")
    vna = r.layout.fmt("IHHII", "IHHII")
    r.span(sec.offset, sec.size, "version needs")
    limit = sec.size // vn.size + 1
    needs: list[VersionNeed] = []
    by_index: dict[int, str] = {}
    off = sec.offset
    for _ in range(limit):
        _ver, cnt, file_off, aux, nxt = r.unpack(vn, off, "version need entry")
        names: list[str] = []
        aoff = off + aux
        for _ in range(min(cnt, limit * 2)):
            _hash, _flags, other, name_off, anext = r.unpack(vna, aoff, "version need aux")
            name = _string_at(table, name_off)
            names.append(name)
            by_index[other & 0x7FFF] = name
            if anext == 0:
                break
            aoff += anext
        needs.append(VersionNeed(_string_at(table, file_off), tuple(names)))
        if nxt == 0:
            break
        off += nxt
    return needs, by_index


def _read_verdef(r: _Reader, sec: _Section, table: str) -> tuple[list[str], dict[int, str]]:
    vd = r.layout.fmt("HHHHIII", "HHHHIII")
    vda = r.layout.fmt("II", "II")
    r.span(sec.offset, sec.size, "version definitions")
    limit = sec.size // vd.size + 1
    defs: list[str] = []
    by_index: dict[int, str] = {}
    off = sec.offset
    for _ in range(limit):
        _ver, flags, ndx, cnt, _hash, aux, nxt = r.unpack(vd, off, "version definition")
        if cnt:
            name_off, _ = r.unpack(vda, off + aux, "version definition aux")
            name = _string_at(table, name_off)
            by_index[ndx & 0x7FFF] = name
            if not flags & 1:  # VER_FLG_BASE names the file itself, not a version
                defs.append(name)
        if nxt == 0:
            break
        off += nxt
    return defs, by_index


def _read_versions(r: _Reader, sections: Sequence[_Section], table: str | None) -> _Versions:
    needs: list[VersionNeed] = []
    need_idx: dict[int, str] = {}
    defs: list[str] = []
    def_idx: dict[int, str] = {}
    for sec in sections:
        if sec.sh_type == _SHT_GNU_VERNEED and sec.size:
            t = table if table is not None else _linked_strtab(r, sections, sec)
            n, i = _read_verneed(r, sec, t)
            needs += n
            need_idx.update(i)
        elif sec.sh_type == _SHT_GNU_VERDEF and sec.size:
            t = table if table is not None else _linked_strtab(r, sections, sec)
            d, i = _read_verdef(r, sec, t)
            defs += d
            def_idx.update(i)
    return _Versions(tuple(needs), need_idx, tuple(defs), def_idx)


def _linked_strtab(r: _Reader, sections: Sequence[_Section], sec: _Section) -> str:
    if not 0 <= sec.link < len(sections):
        raise ElfError(f"section links to section {sec.link}, which does not exist")
    linked = sections[sec.link]
    return r.strings(linked.offset, linked.size, "linked string table")


@dataclass
class _Symbols:
    exports: list[str]
    exports_versioned: set[str]
    exports_unversioned: list[str]
    undefined: list[str]
    undefined_versions: list[str]
    undefined_weak: list[str]
    entry_points: set[str]
    uses_pyfpe: bool = False
    uses_ucs2: bool = False


def _read_symbols(
    r: _Reader,
    sections: Sequence[_Section],
    dynsym: _Section | None,
    table: str | None,
    versions: _Versions,
) -> tuple[_Symbols, bool, bool]:
    """The dynamic symbols; ``table`` is the string table ``dynsym`` links to."""
    out = _Symbols([], set(), [], [], [], [], set())
    if dynsym is None or table is None:
        return out, False, False
    fmt = r.layout.fmt("IIIBBH", "IBBHQQ")
    count = dynsym.size // fmt.size
    raw = r.span(dynsym.offset, count * fmt.size, "dynamic symbol table")
    versym = _read_versym(r, sections, count)
    rows = fmt.iter_unpack(raw)
    if r.cls == 32:
        rows = ((n, i, o, x, v, z) for n, v, z, i, o, x in rows)  # to the 64-bit field order
    versions_or_zero = versym if versym is not None else array("H", bytes(2 * count))
    _scan_symbols(out, table, rows, versions_or_zero, versions)
    return out, True, versym is not None


def _scan_symbols(
    out: _Symbols,
    table: str,
    rows: Iterator[tuple[int, ...]],
    versym: array[int],
    versions: _Versions,
) -> None:
    # The hot loop of the whole audit (75,000 rows for libtorch_cpu): keep lookups local.
    size, find = len(table), table.find
    need_names, def_names = versions.need_by_index, versions.def_by_index
    exports, unversioned, entry_points = out.exports, out.exports_unversioned, out.entry_points
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
            continue  # local binding, section or file symbol, hidden or internal visibility
        if info & 0xF == _STT_FUNC and name.startswith(_ENTRY_PREFIXES):
            entry_points.add(name)
        index = ver & 0x7FFF
        if index >= 2 and index in def_names:
            out.exports_versioned.add(f"{name}@{def_names[index]}")
        elif not ver & _VERSYM_HIDDEN:
            unversioned.append(name)
        if not ver & _VERSYM_HIDDEN:
            exports.append(name)


def _add_undefined(out: _Symbols, name: str, bind: int, kind: int, version: str) -> None:
    if name in _PYFPE and kind in (_STT_FUNC, _STT_NOTYPE):
        out.uses_pyfpe = True
    if kind == _STT_FUNC and "PyUnicodeUCS2_" in name:
        out.uses_ucs2 = True
    if bind == _STB_WEAK:
        out.undefined_weak.append(name)
    else:
        out.undefined.append(name)
        out.undefined_versions.append(version)


def _read_versym(r: _Reader, sections: Sequence[_Section], count: int) -> array[int] | None:
    sec = next((s for s in sections if s.sh_type == _SHT_GNU_VERSYM), None)
    if sec is None:
        return None
    n = min(count, sec.size // 2)
    values = array("H", bytes(r.span(sec.offset, n * 2, "symbol version table")))
    if r.little != (sys.byteorder == "little"):
        values.byteswap()
    if n < count:
        values.extend([0] * (count - n))
    return values


def _isa(r: _Reader, sections: Sequence[_Section]) -> tuple[str | None, bool]:
    """x86-64 ISA level from GNU property notes, exactly as auditwheel reads it."""
    ext: str | None = None
    error = False
    for sec in sections:
        if sec.sh_type == _SHT_NOTE and sec.size:
            found, bad = _isa_in_notes(r, bytes(r.span(sec.offset, sec.size, "note section")))
            ext, error = found or ext, error or bad
    return ext, error


def _isa_in_notes(r: _Reader, notes: bytes) -> tuple[str | None, bool]:
    """The first GNU property note of one note section (annobin sections hold thousands)."""
    header = r.layout.fmt("III", "III")
    prop = r.layout.fmt("II", "II")
    word = r.layout.fmt("I", "I")
    align = 8 if r.cls == 64 else 4
    off, end = 0, len(notes)
    while off + 12 < end:
        namesz, descsz, ntype = header.unpack_from(notes, off)
        name_at = off + 12
        off = name_at + ((namesz + 3) & ~3)
        desc_at = off
        off += (descsz + 3) & ~3
        if ntype != _NT_GNU_PROPERTY_TYPE_0 or notes[name_at : name_at + 4] != b"GNU\0":
            continue
        p, p_end = desc_at, desc_at + descsz
        while p < p_end:
            pr_type, datasz = prop.unpack(_cut(notes, p, 8))
            if pr_type == _GNU_PROPERTY_X86_ISA_1_NEEDED and datasz == 4:
                data = word.unpack(_cut(notes, p + 8, 4))[0]
                data -= data & 1
                level = next((lv for bit, lv in ((8, 4), (4, 3), (2, 2)) if data & bit), 0)
                if level:
                    return f"x86_64_v{level}", False
                if data:
                    return None, True
            p += (datasz + 8 + align - 1) & ~(align - 1)
        break
    return None, False


def _cut(data: bytes, offset: int, size: int) -> bytes:
    if offset + size > len(data):
        raise ElfError(f"GNU property at offset {offset} runs past its note section")
    return data[offset : offset + size]


def _arch(r: _Reader, h: _Header) -> tuple[str | None, str | None]:
    arch = _ARCH_BY_MACHINE.get((h.machine, r.cls, r.little))
    if arch is None:
        return None, f"unknown architecture (e_machine {h.machine}, {r.cls}-bit)"
    if arch == "armv7l":
        if (h.flags & _EF_ARM_EABIMASK) != _EF_ARM_EABI_VER5:
            return None, "invalid ARM EABI version for armv7l"
        if (h.flags & _EF_ARM_ABI_FLOAT_HARD) != _EF_ARM_ABI_FLOAT_HARD:
            return None, "armv7l shall use hard-float"
    return arch, None


def read_elf(data: bytes | bytearray | memoryview | ByteSource) -> ElfInfo:
    """Decode ``data``; raises :class:`ElfError` (only) when it is not a readable ELF file."""
    try:
        return _read_elf(data)
    except ElfError:
        raise
    except (struct.error, ValueError, IndexError, OverflowError, TypeError, MemoryError) as exc:
        raise ElfError(f"malformed ELF: {exc}") from None


def _read_elf(data: bytes | bytearray | memoryview | ByteSource) -> ElfInfo:
    r = _Reader(data)
    h = _read_header(r)
    segments = _segments(r, h)
    sections = _sections(r, h)
    dyn = _read_dynamic(r, segments, sections)
    dynsym = next((s for s in sections if s.sh_type == _SHT_DYNSYM), None)
    table = _linked_strtab(r, sections, dynsym) if dynsym is not None else None
    versions = _read_versions(r, sections, table)
    syms, has_symbols, has_versym = _read_symbols(r, sections, dynsym, table, versions)
    arch, arch_error = _arch(r, h)
    isa_ext, isa_error = _isa(r, sections) if arch == "x86_64" else (None, False)
    all_unversioned = len(syms.exports_unversioned) == len(syms.exports)
    return ElfInfo(
        elf_class=r.cls,
        little_endian=r.little,
        machine=h.machine,
        osabi=r.osabi,
        elf_type=h.elf_type,
        arch=arch,
        arch_error=arch_error,
        interpreter=dyn.interpreter,
        soname=dyn.soname,
        needed=dyn.needed,
        rpath=dyn.rpath,
        runpath=dyn.runpath,
        version_needs=versions.needs,
        version_defs=versions.defs,
        has_symbols=has_symbols,
        has_versym=has_versym,
        export_names="\0".join(syms.exports),
        exports_versioned=frozenset(syms.exports_versioned),
        exports_unversioned=None if all_unversioned else frozenset(syms.exports_unversioned),
        undefined=tuple(syms.undefined),
        undefined_versions=tuple(syms.undefined_versions),
        undefined_weak=tuple(syms.undefined_weak),
        entry_points=frozenset(syms.entry_points),
        uses_pyfpe=syms.uses_pyfpe,
        uses_ucs2=syms.uses_ucs2,
        isa_ext=isa_ext,
        isa_error=isa_error,
    )


def read_elf_file(path: Path) -> ElfInfo:
    """Read a file from disk; a missing or unreadable file raises :class:`ElfError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ElfError(f"cannot read {path}: {exc.strerror or exc}") from None
    return read_elf(data)


def looks_like_elf(name: str, head: bytes) -> bool:
    """A member that must parse as ELF: it starts with the magic or is named like a library."""
    base = name.rsplit("/", 1)[-1]
    return head.startswith(ELF_MAGIC) or base.endswith(".so") or ".so." in base


# ---------------------------------------------------------------------------------------------
# Serialisation for the audit cache: plain JSON-able data, no pickle.


def to_record(info: ElfInfo) -> dict[str, object]:
    record: dict[str, object] = {}
    for key in info.__dataclass_fields__:
        value = getattr(info, key)
        if isinstance(value, frozenset):
            record[key] = sorted(value)
        elif key == "version_needs":
            record[key] = [[n.file, list(n.versions)] for n in value]
        elif isinstance(value, tuple):
            record[key] = list(value)
        else:
            record[key] = value
    return record


_SET_FIELDS = frozenset({"exports_versioned", "exports_unversioned", "entry_points"})


def from_record(record: Mapping[str, object]) -> ElfInfo:
    """Inverse of :func:`to_record`; a record that does not fit raises ValueError or TypeError."""
    fields: dict[str, object] = {}
    for key in ElfInfo.__dataclass_fields__:
        value = record[key]
        if key == "version_needs":
            fields[key] = tuple(VersionNeed(str(f), tuple(map(str, v))) for f, v in _rows(value))
        elif isinstance(value, list):
            items = tuple(str(v) for v in value)
            fields[key] = frozenset(items) if key in _SET_FIELDS else items
        elif value is None or isinstance(value, (bool, int, str)):
            fields[key] = value
        else:
            raise TypeError(f"unexpected {type(value).__name__} for {key}")
    info = ElfInfo(**fields)  # type: ignore[arg-type]
    if len(info.undefined) != len(info.undefined_versions):
        raise ValueError("undefined symbols and their versions differ in length")
    return info


def _rows(value: object) -> list[tuple[object, list[object]]]:
    if not isinstance(value, list):
        raise TypeError("version_needs is not a list")
    rows: list[tuple[object, list[object]]] = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], list):
            raise TypeError("malformed version_needs row")
        rows.append((item[0], item[1]))
    return rows


# ---------------------------------------------------------------------------------------------
# Libraries on this host, read once each (the search directories come from wheels.policy).


class HostLibraries:
    """Find and read libraries on this host by name; each path is looked at once."""

    def __init__(self, dirs: Sequence[str]) -> None:
        self.dirs = tuple(dirs)
        self._by_path: dict[str, tuple[str, ElfInfo] | None] = {}
        self._found: dict[tuple[object, ...], tuple[str, ElfInfo] | None] = {}

    def find(
        self, soname: str, like: ElfInfo, extra_dirs: Sequence[str] = ()
    ) -> tuple[str, ElfInfo] | None:
        """First ``soname`` in ``extra_dirs`` then the host dirs that suits ``like``'s platform."""
        key = (soname, like.platform, *extra_dirs)
        if key not in self._found:
            self._found[key] = self._search(soname, like, extra_dirs)
        return self._found[key]

    def _search(
        self, soname: str, like: ElfInfo, extra_dirs: Sequence[str]
    ) -> tuple[str, ElfInfo] | None:
        if "/" in soname:
            return None
        for d in (*extra_dirs, *self.dirs):
            hit = self.locate(f"{d.rstrip('/')}/{soname}")
            if hit is not None and like.is_compatible(hit[1]):
                return hit
        return None

    def prefetch(self, sonames: Sequence[str]) -> None:
        """Read the first file of each name in the search directories, ahead of need."""
        for soname in sonames:
            next((h for d in self.dirs if (h := self.locate(f"{d.rstrip('/')}/{soname}"))), None)

    def read(self, path: str) -> ElfInfo | None:
        hit = self.locate(path)
        return hit[1] if hit is not None else None

    def locate(self, path: str) -> tuple[str, ElfInfo] | None:
        """(real path, ELF data) of the ELF file at ``path``; None if there is none."""
        if path not in self._by_path:
            real = os.path.realpath(path)
            info = _try_read(real)
            self._by_path[path] = (real, info) if info is not None else None
        return self._by_path[path]


def _try_read(path: str) -> ElfInfo | None:
    if not os.path.isfile(path):  # noqa: PTH113 - called thousands of times; pathlib is slower
        return None
    try:
        return read_elf_file(Path(path))
    except ElfError:
        return None
