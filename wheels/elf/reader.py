"""The structure of an ELF file: bounds-checked access to its bytes, its header, its program and
section headers, and sections found by name.

Every other module of :mod:`wheels.elf` reads through :class:`Reader`, which checks each offset
and size against the file, so that garbage raises :class:`ElfError` and nothing else.
"""

from __future__ import annotations

import os
import struct
import sys
from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path


class ByteSource(Protocol):
    """Random access to the bytes of one file that need not all be in memory at once."""

    @property
    def size(self) -> int: ...

    def range(self, offset: int, size: int) -> memoryview: ...

    def head(self, size: int) -> bytes: ...


Data = bytes | bytearray | memoryview | ByteSource

ELF_MAGIC = b"\x7fELF"

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 7, 8, 11
_SHN_XINDEX = 0xFFFF
_MAX_STRING = 1 << 16


class ElfError(Exception):
    """Bytes that start like an ELF file (or are named like one) but cannot be read as one."""


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
        if len(self.parts) == 1:  # (most members: inflated in one piece)
            view: memoryview = self.parts[0][offset : offset + size]
            return view
        i = bisect_right(self.starts, offset) - 1
        inner = offset - self.starts[i]
        part = self.parts[i]
        if inner + size <= len(part):
            return part[inner : inner + size]
        j = bisect_left(self.starts, offset + size)
        return memoryview(b"".join(self.parts[i:j]))[inner : inner + size]

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))


class FileBytes:
    """The bytes of an open file, read range by range: a question about a few headers of a
    library of hundreds of megabytes reads a few kilobytes of it."""

    owned = False  # (until __init__ ends: a failed fstat leaves the closing to the caller)

    def __init__(self, fd: int, *, name: str = "the file", owned: bool = False) -> None:
        self.fd = fd
        self.name = name
        self.size = os.fstat(fd).st_size
        self.owned = owned

    @classmethod
    def open(cls, path: str | Path) -> FileBytes:
        """The file at ``path``, open until the last reader of it lets it go (a host library
        whose definitions are decoded later: :class:`wheels.elf.HostLibraries`)."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return cls(fd, name=str(path), owned=True)
        except BaseException:
            os.close(fd)
            raise

    def range(self, offset: int, size: int) -> memoryview:
        try:
            return memoryview(os.pread(self.fd, max(size, 0), offset))
        except OSError as exc:
            raise ElfError(f"cannot read {self.name}: {exc.strerror or exc}") from None

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # (os.close bound here: at interpreter exit, this module's globals may be gone first)
        if self.owned:
            self.owned = False
            try:  # noqa: SIM105 (not contextlib.suppress: it too may be gone by then)
                _close(self.fd)
            except OSError:
                pass


_MALFORMED = (struct.error, ValueError, IndexError, OverflowError, TypeError, MemoryError)


@contextmanager
def malformed_as_elf_error() -> Iterator[None]:
    """Whatever a damaged table makes the decoding code raise in this block becomes
    :class:`ElfError`."""
    try:
        yield
    except _MALFORMED as exc:
        raise ElfError(f"malformed ELF: {exc}") from None


@dataclass(frozen=True)
class Formats:
    """Struct formats for one ELF class and byte order."""

    cls: int
    end: str

    def fmt(self, spec32: str, spec64: str) -> struct.Struct:
        return struct.Struct(self.end + (spec64 if self.cls == 64 else spec32))


class Reader:
    """Bounds-checked access to the bytes of one ELF file."""

    def __init__(self, data: Data) -> None:
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
        self.layout = Formats(self.cls, "<" if self.little else ">")
        self.osabi = ident[7]

    def span(self, offset: int, size: int, what: str) -> memoryview:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(f"{what} at offset {offset} size {size} lies outside the file")
        return self.data.range(offset, size)

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        values: tuple[int, ...] = fmt.unpack(self.span(offset, fmt.size, what))
        return values

    def window(self, offset: int, size: int, what: str) -> Window:
        """A table of the file read at once (one read of a file, not one a row), its rows
        unpacked by :meth:`Window.unpack`; raises as :meth:`span` does."""
        return Window(self, offset, self.span(offset, size, what))

    def forget_strings(self) -> None:
        """Lets go of the string tables read so far (read again if asked for again)."""
        self._strings.clear()

    def strings(self, offset: int, size: int, what: str) -> str:
        # latin-1 keeps one character per byte, so string offsets stay valid in the text.
        key = (offset, size)
        if key not in self._strings:
            # (decoded from the view: a copy of 82 MB of names first would double them)
            self._strings[key] = str(self.span(offset, size, what), "latin-1")
        return self._strings[key]


class Window:
    """The bytes of one table of an ELF file, held while its rows are read; a row outside it
    (a link that leads elsewhere) is read from the file, as :meth:`Reader.unpack` reads it."""

    __slots__ = ("reader", "start", "view")

    def __init__(self, reader: Reader, start: int, view: memoryview) -> None:
        self.reader = reader
        self.start = start
        self.view = view

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        inner = offset - self.start
        if inner >= 0 and inner + fmt.size <= len(self.view):
            values: tuple[int, ...] = fmt.unpack_from(self.view, inner)
            return values
        return self.reader.unpack(fmt, offset, what)


@dataclass(frozen=True, slots=True)
class Header:
    """The ELF header's fields that locate everything else."""

    elf_type: int
    machine: int
    flags: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int


@dataclass(frozen=True, slots=True)
class Section:
    """One section header."""

    name: int  # offset in the section-name string table
    sh_type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True, slots=True)
class Segment:
    """One program header."""

    p_type: int
    offset: int
    vaddr: int
    filesz: int
    flags: int = 0  # PF_X 1, PF_W 2, PF_R 4


def read_header(r: Reader) -> Header:
    fmt = r.layout.fmt("HHIIIIIHHHHHH", "HHIQQQIHHHHHH")
    (e_type, machine, _ver, _entry, phoff, shoff, flags, _ehsize, phentsize, phnum, shentsize,
     shnum, shstrndx) = r.unpack(fmt, 16, "ELF header")  # fmt: skip
    if phnum and phentsize != (32 if r.cls == 32 else 56):
        raise ElfError(f"bad program header entry size {phentsize}")
    if shnum and shentsize != (40 if r.cls == 32 else 64):
        raise ElfError(f"bad section header entry size {shentsize}")
    return Header(
        e_type, machine, flags, phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx
    )


def read_segments(r: Reader, h: Header) -> list[Segment]:
    if h.phnum == 0:
        return []
    table = r.window(h.phoff, h.phnum * h.phentsize, "program header table")
    out: list[Segment] = []
    if r.cls == 64:
        fmt = r.layout.fmt("", "IIQQQQQQ")
        for i in range(h.phnum):
            p_type, fl, off, vaddr, _pa, filesz, _msz, _al = table.unpack(fmt, h.phoff + i * 56, "")
            out.append(Segment(p_type, off, vaddr, filesz, fl))
    else:
        fmt = r.layout.fmt("IIIIIIII", "")
        for i in range(h.phnum):
            p_type, off, vaddr, _pa, filesz, _msz, fl, _al = table.unpack(fmt, h.phoff + i * 32, "")
            out.append(Segment(p_type, off, vaddr, filesz, fl))
    return out


HEAD = 4096  # a file's program headers are expected in its first bytes


def head_layout(head: bytes, final: bool) -> tuple[Header, list[Segment]] | None:
    """The ELF header and program headers from a file's first bytes as they stream past;
    None while they are too few to tell (unless ``final``: enough of them have come, by
    :data:`HEAD`, or the file ends). Raises :class:`ElfError` when they are not an ELF file's."""
    try:
        with malformed_as_elf_error():
            r = Reader(head)
            header = read_header(r)
            return header, read_segments(r, header)
    except ElfError:
        if not final and ELF_MAGIC.startswith(head[:4]):
            return None
        raise


def read_sections(r: Reader, h: Header) -> list[Section]:
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
    table = r.window(h.shoff, shnum * fmt.size, "section header table")
    out: list[Section] = []
    for i in range(shnum):
        name, sh_type, _fl, _addr, off, size, link, _info, _al, entsize = table.unpack(
            fmt, h.shoff + i * fmt.size, "section header"
        )
        out.append(Section(name, sh_type, off, size, link, entsize))
    return out


def string_at(table: str, offset: int) -> str:
    if offset >= len(table):
        raise ElfError(f"string offset {offset} beyond a string table of {len(table)} bytes")
    end = table.find("\0", offset, offset + _MAX_STRING)
    if end < 0:
        raise ElfError(f"unterminated string at offset {offset}")
    return table[offset:end]


def linked_strtab(r: Reader, sections: Sequence[Section], sec: Section) -> str:
    if not 0 <= sec.link < len(sections):
        raise ElfError(f"section links to section {sec.link}, which does not exist")
    linked = sections[sec.link]
    return r.strings(linked.offset, linked.size, "linked string table")


def vaddr_to_offset(segments: Sequence[Segment], vaddr: int) -> int | None:
    for seg in segments:
        if seg.p_type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return seg.offset + vaddr - seg.vaddr
    return None


@dataclass(frozen=True)
class Image:
    """One ELF file's reader, header, segments and sections, read once."""

    reader: Reader
    header: Header
    segments: list[Segment]
    sections: list[Section]

    @classmethod
    def parse(cls, data: Data) -> Image:
        r = Reader(data)
        h = read_header(r)
        return cls(r, h, read_segments(r, h), read_sections(r, h))

    def section_named(self, name: str) -> Section | None:
        """The first section called ``name``; None when there is none or no name table."""
        index = self.header.shstrndx
        if index == _SHN_XINDEX and self.sections:
            index = self.sections[0].link  # extended numbering, as for the section count
        if not 0 < index < len(self.sections):
            return None
        names = self.sections[index]
        table = self.reader.strings(names.offset, names.size, "section name table")
        return next((s for s in self.sections if _name_is(table, s.name, name)), None)


def _name_is(table: str, offset: int, name: str) -> bool:
    return offset < len(table) and table.startswith(name + "\0", offset)


@contextmanager
def opened(source: Data | str | os.PathLike[str]) -> Iterator[Image]:
    """The parsed structure of ``source``, a file read range by range when given as a path; in
    the block, malformed data raises :class:`ElfError` (:func:`malformed_as_elf_error`).

    A file that cannot be opened raises OSError; one that is not ELF, :class:`ElfError`.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as file, malformed_as_elf_error():
            yield Image.parse(FileBytes(file.fileno()))
    else:
        with malformed_as_elf_error():
            yield Image.parse(source)


def section_span(source: Data | Path, name: str) -> tuple[int, int] | None:
    """(file offset, size) of the section called ``name``; None when there is none."""
    with opened(source) as image:
        section = image.section_named(name)
        return (section.offset, section.size) if section is not None else None


def unsigned_words(data: bytes, code: Literal["H", "I", "Q"], little: bool) -> Sequence[int]:
    """``data`` as unsigned integers of the ``struct`` format ``code`` (``H``, ``I``, ``Q``) in
    the given byte order: a view when that is this machine's."""
    if little == (sys.byteorder == "little"):
        return memoryview(data).cast(code)
    count = len(data) // struct.calcsize(code)
    return struct.unpack(f"{'<' if little else '>'}{count}{code}", data)


def section_spans(source: Data | Path, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """(file offset, size) of each section of ``names`` the file has, from one read of its
    headers; a section that occupies no bytes of the file (SHT_NOBITS) has size 0, and one
    that lies outside the file raises :class:`ElfError`."""
    spans: dict[str, tuple[int, int]] = {}
    with opened(source) as image:
        for name in names:
            section = image.section_named(name)
            if section is None:
                continue
            size = 0 if section.sh_type == SHT_NOBITS else section.size
            if section.offset < 0 or section.offset + size > image.reader.size:  # not read
                raise ElfError(f"section {name} at offset {section.offset} size {size} lies "
                               "outside the file")  # fmt: skip
            spans[name] = (section.offset, size)
    return spans


def section_bytes(source: Data | Path, name: str) -> bytes | None:
    """The content of the section called ``name`` (``.nv_fatbin``, ``.note.gnu.build-id``);
    None when there is none. A section that lies outside the file raises :class:`ElfError`."""
    with opened(source) as image:
        section = image.section_named(name)
        if section is None:
            return None
        if section.sh_type == SHT_NOBITS:  # .bss and the like occupy no bytes of the file
            return b""
        return bytes(image.reader.span(section.offset, section.size, f"section {name}"))
