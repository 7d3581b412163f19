"""Read the CUDA device code that a host ELF file carries in its fat binaries, from bytes.

nvcc puts the device code of a host object in a *fat binary*: SASS (cubin ELF images) for real
architectures and PTX for virtual ones. The caller reads the section and hands its bytes here;
this module parses them without decompressing anything and never raises anything but
:class:`FatbinError` on bad input.

Format facts relied on (little-endian throughout):

* Sections. ``.nv_fatbin`` holds the fat binaries the CUDA runtime registers when the file is
  loaded; ``__nv_relfatbin`` holds relocatable device code (``-rdc=true``) kept for a later
  device link; ``.nvFatBinSegment`` holds only 24-byte ``__fatBinC_Wrapper_t`` records
  (magic 0x466243B1, version 1, or 2 for a device-linked image whose extra pointer lists the
  pre-linked fat binaries) that *point at* the data in the two sections above, so it has
  nothing to read here. Source: the toolkit's ``include/fatbinary_section.h`` and
  ``bin/crt/link.stub``.
* Several fat binaries follow one another in a section (the linker concatenates one per object,
  each a multiple of 8 bytes long); each starts with ``fatBinaryHeader``: u32 magic 0xBA55ED50,
  u16 version 1, u16 header size, u64 size of what follows the header. Magic 0x1EE55A01 marks
  the pre-CUDA-4 format. Source: NVIDIA's ``fatbinary.h`` (CUDA 10 era toolkits), which also
  names the entry kinds: 1 PTX, 2 ELF, 4 old cubin, 8 NVVM IR (LTO-IR).
* Entries follow the header back to back, each a header of its own followed by its payload.
  The entry header layout is not published; it was established by compiling a range of
  ``-gencode`` mixes with nvcc 13.0 and checking each field against what ``cuobjdump -elf -ptx``
  prints for the same files (cuobjdump 13.2 and 13.5), and against real wheels built with CUDA
  11.8 to 13.3 (tests/integration/test_fatbin_nvcc.py repeats the comparison):
  u16 kind, u16 entry version (0x0101), u32 header size (64 to 128: longer headers carry an
  identifier, ptxas options or compatibility data), u64 payload size padded to 8, u32 compressed
  size, u32 offset of the extension, u16 minor and u16 major version, u32 architecture number
  (sm_XY is XY: 75, 90, 100, 121), u32 identifier offset and size, u64 flags, u64 key (for
  obfuscated LTO-IR), u64 uncompressed size. For PTX the version is the PTX ISA version of the
  ``.version`` line (cuobjdump's "code version = [9,0]"); for SASS it is the cubin format
  version (cuobjdump's [1,7] or [1,8]).
* Flags: 0x1 64-bit, 0x2 debug (``-G``), 0x10 Linux host, 0x2000 LZ4-compressed payload
  (``--compress-mode=speed``; the default up to CUDA 12.8), 0x8000 zstd-compressed payload
  (the CUDA 13 default; the payload starts with the zstd magic 28 B5 2F FD), 0x10000 obfuscated,
  0x100000 arch-specific target (``sm_90a``, ``compute_100a``), 0x200000 family target
  (``sm_100f``, ``compute_120f``). cuobjdump's ``--list-elf`` file names drop the ``f`` of a
  family cubin (``x.1.sm_100.cubin``) while its ``-elf`` dump and ``--list-ptx`` keep it.
* nvcc 13.0 compresses PTX (and relocatable cubins) by default, and every image with
  ``-Xfatbin -compress-all``; ``--compress-mode=none`` stores everything plain. The header
  carries the architecture and the PTX ISA version whatever the compression, so nothing here
  decompresses. Only a PTX entry whose header says version 0.0 and whose text is stored plain
  has its ``.version`` line read instead; no toolkit seen writes such a header.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from wheels.cuda import FATBIN_SECTION, FATBIN_SECTIONS, RELFATBIN_SECTION

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping


class Ranges(Protocol):
    """Random access to bytes that need not all be in memory (``wheels.elf.ByteSource``)."""

    @property
    def size(self) -> int: ...

    def range(self, offset: int, size: int) -> memoryview: ...


class _Bytes(Protocol):
    """What the parser reads: ``size`` bytes, some ranges of them, and where zeros end."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, size: int) -> bytes: ...

    def nonzero(self, offset: int) -> int | None: ...


Kind = Literal["sass", "ptx", "ltoir", "other"]
Variant = Literal["", "a", "f"]
Compression = Literal["lz4", "zstd"]

WRAPPER_SECTION = ".nvFatBinSegment"

FATBIN_MAGIC = 0xBA55ED50
OLD_STYLE_MAGIC = 0x1EE55A01
WRAPPER_MAGIC = 0x466243B1
FATBIN_VERSION = 1


_KINDS: Mapping[int, Kind] = {1: "ptx", 2: "sass", 8: "ltoir"}
_FLAG_DEBUG = 0x2
_FLAG_LZ4 = 0x2000
_FLAG_ZSTD = 0x8000
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY = 0x200000

_HEADER = struct.Struct("<IHHQ")
# kind, entry version, header size, padded payload size, compressed size, extension offset,
# minor, major, arch, identifier offset, identifier size, flags, key, uncompressed size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_PTX_VERSION = re.compile(rb"(?m)^[ \t]*\.version[ \t]+(\d+)\.(\d+)")
_PTX_PREAMBLE = 4096


class FatbinError(Exception):
    """Bytes given as a fat binary section that cannot be read as one; says what and where."""


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One image in a fat binary: SASS for ``sm_<arch>`` or PTX for ``compute_<arch>``.

    ``size`` is what the payload takes in the fat binary (compressed, padded to 8 bytes);
    ``offset`` is where the entry's header starts in the section it was read from. ``count``
    is 1 for an entry as read; :func:`distinct` merges equal images into one entry that counts
    them (its sizes are their sums, its offset the first one's).
    """

    kind: Kind
    arch: int
    variant: Variant
    ptx_version: tuple[int, int] | None
    code_version: tuple[int, int]
    compression: Compression | None
    size: int
    uncompressed_size: int
    relocatable: bool
    debug: bool
    offset: int
    kind_code: int
    count: int = 1

    @property
    def compressed(self) -> bool:
        return self.compression is not None

    @property
    def target(self) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX and LTO-IR."""
        prefix = "sm" if self.kind == "sass" else "compute"
        return f"{prefix}_{self.arch}{self.variant}"


@dataclass(frozen=True, slots=True)
class DeviceCode:
    """The device code of one ELF file: its entries, in section order, and the sections read."""

    entries: tuple[FatbinEntry, ...] = ()
    sections: tuple[str, ...] = ()

    @property
    def sass_archs(self) -> tuple[str, ...]:
        return _targets(e for e in self.entries if e.kind == "sass")

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        return _targets(e for e in self.entries if e.kind == "ptx")

    def loaded(self) -> DeviceCode:
        """The code the CUDA runtime registers from this file: the ``.nv_fatbin`` entries when
        that section was read (even if it is empty), else the relocatable ones, which is also
        what ``cuobjdump`` shows without ``-all``."""
        relocatable = FATBIN_SECTION not in self.sections
        kept = tuple(e for e in self.entries if e.relocatable == relocatable)
        return DeviceCode(kept, self.sections)


def _targets(entries: Iterable[FatbinEntry]) -> tuple[str, ...]:
    keys = {(e.arch, e.variant, e.target) for e in entries}
    return tuple(target for _, _, target in sorted(keys))


def combine(codes: Iterable[DeviceCode]) -> DeviceCode:
    """One file's device code from what was read out of each of its sections."""
    entries: list[FatbinEntry] = []
    sections: list[str] = []
    for code in codes:
        entries.extend(code.entries)
        sections.extend(s for s in code.sections if s not in sections)
    return DeviceCode(tuple(entries), tuple(sections))


def read_device_code(sections: Mapping[str, bytes]) -> DeviceCode:
    """The device code of an ELF file, given its sections' bytes by name (others are ignored)."""
    return combine(read_fatbin(sections[n], n) for n in FATBIN_SECTIONS if n in sections)


def read_fatbin(data: bytes, section: str = FATBIN_SECTION) -> DeviceCode:
    """Every entry of every fat binary in ``data``, the bytes of section ``section``."""
    return _read(_Buffer(data), section)


@dataclass(frozen=True)
class Seen:
    """What is known of a file's bytes without reading them again (:mod:`wheels.cuda.tap`
    collects it as the file streams past): bytes by offset, and where the first byte that is
    not zero lies from an offset on."""

    bytes_at: Mapping[int, bytes]
    nonzero_from: Mapping[int, int]


def read_fatbin_at(
    source: Ranges, offset: int, size: int, section: str, seen: Seen | None = None
) -> DeviceCode:
    """Like :func:`read_fatbin`, for the ``size`` bytes at ``offset`` of ``source``, of which
    only the headers are read: a section of hundreds of megabytes is never copied. What
    ``seen`` knows is not read from ``source``."""
    if offset < 0 or size < 0 or offset + size > source.size:
        raise FatbinError(f"{section} at offset {offset:#x} size {size} lies outside the file")
    return _read(_Window(source, offset, size, seen or Seen({}, {})), section)


_NONZERO = re.compile(rb"[^\x00]")


def first_nonzero(data: bytes | bytearray, at: int = 0) -> int:
    """Where the first byte that is not zero is in ``data`` from ``at``; -1 where there is
    none."""
    match = _NONZERO.search(data, at)
    return match.start() if match else -1


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self.data, self.size = data, len(data)

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]

    def nonzero(self, offset: int) -> int | None:
        found = first_nonzero(self.data, offset)
        return found if found >= 0 else None


class _Window:
    """``size`` bytes at ``base`` of a larger source, read a header at a time."""

    STEP = 4096

    def __init__(self, source: Ranges, base: int, size: int, seen: Seen) -> None:
        self.source, self.base, self.size, self.seen = source, base, size, seen

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        kept = self.seen.bytes_at.get(self.base + offset)
        if kept is not None and len(kept) >= size:
            return kept[:size]
        return bytes(self.source.range(self.base + offset, size))

    def nonzero(self, offset: int) -> int | None:
        if offset >= self.size:
            return None
        kept = self.seen.bytes_at.get(self.base + offset)
        if kept and kept[0]:
            return offset
        known = self.seen.nonzero_from.get(self.base + offset)
        if known is not None:
            return known - self.base if known - self.base < self.size else None
        while offset < self.size:
            found = first_nonzero(self.read(offset, self.STEP))
            if found >= 0:
                return offset + found
            offset += self.STEP
        return None


def _read(data: _Bytes, section: str) -> DeviceCode:
    relocatable = section == RELFATBIN_SECTION
    entries: list[FatbinEntry] = []
    for start, end in _fatbins(data, section):
        entries.extend(_entries(data, start, end, section, relocatable))
    return DeviceCode(tuple(entries), (section,))


def _fatbins(data: _Bytes, section: str) -> Iterator[tuple[int, int]]:
    """(first entry, end) of each fat binary, skipping zero padding between them."""
    offset = 0
    while (found := data.nonzero(offset)) is not None:
        offset = found
        if data.size - offset < _HEADER.size:
            raise _error(section, offset, f"{data.size - offset} bytes, too few for a header")
        magic, version, header_size, size = _HEADER.unpack(data.read(offset, _HEADER.size))
        _check_magic(magic, section, offset)
        if version != FATBIN_VERSION:
            raise _error(section, offset, f"fat binary version {version}, not {FATBIN_VERSION}")
        if header_size < _HEADER.size:
            raise _error(section, offset, f"header size {header_size}, under {_HEADER.size}")
        end = offset + header_size + size
        if end > data.size:
            left = data.size - offset
            raise _error(section, offset, f"fat binary of {end - offset} bytes, {left} left")
        yield offset + header_size, end
        offset = end


def _check_magic(magic: int, section: str, offset: int) -> None:
    if magic == FATBIN_MAGIC:
        return
    if magic == WRAPPER_MAGIC:
        why = f"a {WRAPPER_SECTION} wrapper record, which only points at the fat binary data"
    elif magic == OLD_STYLE_MAGIC:
        why = "an old-style (before CUDA 4.0) fat binary, which is not supported"
    else:
        why = f"magic {magic:#010x}, not a fat binary header ({FATBIN_MAGIC:#010x})"
    raise _error(section, offset, why)


def _entries(
    data: _Bytes, start: int, end: int, section: str, relocatable: bool
) -> Iterator[FatbinEntry]:
    offset = start
    while offset < end:
        if end - offset < _ENTRY.size:
            left = f"{end - offset} bytes left in the fat binary"
            raise _error(section, offset, f"{left}, too few for an entry header")
        entry, offset = _entry(data, offset, end, section, relocatable)
        yield entry


def _entry(
    data: _Bytes, offset: int, end: int, section: str, relocatable: bool
) -> tuple[FatbinEntry, int]:
    (kind_code, _, header_size, padded, _, _, minor, major, arch, _, _, flags, _, full) = (
        _ENTRY.unpack(data.read(offset, _ENTRY.size))
    )
    if header_size < _ENTRY.size:
        raise _error(section, offset, f"entry header size {header_size}, under {_ENTRY.size}")
    payload = offset + header_size
    if payload + padded > end:
        raise _error(
            section, offset, f"entry of {header_size + padded} bytes runs past its fat binary"
        )
    kind = _KINDS.get(kind_code, "other")
    compression = _compression(flags)
    version = (major, minor)
    ptx = _ptx_version(data, payload, padded, version, compression) if kind == "ptx" else None
    entry = FatbinEntry(
        kind=kind,
        arch=arch,
        variant=_variant(flags),
        ptx_version=ptx,
        code_version=version,
        compression=compression,
        size=padded,
        uncompressed_size=full if compression else padded,
        relocatable=relocatable,
        debug=bool(flags & _FLAG_DEBUG),
        offset=offset,
        kind_code=kind_code,
    )
    return entry, payload + padded


def _variant(flags: int) -> Variant:
    if flags & _FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & _FLAG_FAMILY:
        return "f"
    return ""


def _compression(flags: int) -> Compression | None:
    if flags & _FLAG_ZSTD:
        return "zstd"
    if flags & _FLAG_LZ4:
        return "lz4"
    return None


def _ptx_version(
    data: _Bytes,
    payload: int,
    size: int,
    header: tuple[int, int],
    compression: Compression | None,
) -> tuple[int, int] | None:
    """The header's PTX ISA version; if it says 0.0, the ``.version`` line of plain text."""
    if header != (0, 0):
        return header
    if compression is not None:
        return None
    text = data.read(payload, min(size, _PTX_PREAMBLE))
    found = _PTX_VERSION.search(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _error(section: str, offset: int, what: str) -> FatbinError:
    return FatbinError(f"{section} at offset {offset:#x}: {what}")
