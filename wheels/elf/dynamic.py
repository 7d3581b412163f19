"""The dynamic segment: the interpreter, SONAME, DT_NEEDED and the RPATH/RUNPATH search paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.elf.reader import (
    PT_DYNAMIC,
    PT_INTERP,
    ElfError,
    Image,
    Reader,
    Section,
    Segment,
    opened,
    string_at,
    vaddr_to_offset,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from wheels.elf.reader import Data

_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ = 0, 1, 5, 10
_DT_SONAME, _DT_RPATH, _DT_RUNPATH = 14, 15, 29


@dataclass(frozen=True)
class Dynamic:
    """What the dynamic segment says about loading the file."""

    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None  # the first DT_RPATH, as ld.so reads it
    runpath: str | None  # the first DT_RUNPATH
    search: tuple[str, ...] = ()  # each DT_RPATH and DT_RUNPATH, in the order they are listed
    tags: tuple[tuple[int, int], ...] = ()  # every (d_tag, d_val) up to DT_NULL


def dynamic(source: Data | Path) -> Dynamic:
    """The dynamic segment of ``source`` alone, without its symbol tables (a path is read only
    where the headers point); raises :class:`ElfError` when it is not a readable ELF file."""
    with opened(source) as image:
        return read_dynamic(image, every_path=True)


def read_dynamic(image: Image, *, every_path: bool = False) -> Dynamic:
    """``every_path`` fills :attr:`Dynamic.search` (the audit reads the first of each only)."""
    r, segments = image.reader, image.segments
    interpreter = _interpreter(r, segments)
    dyn = next((s for s in segments if s.p_type == PT_DYNAMIC), None)
    if dyn is None:
        return Dynamic(interpreter, None, (), None, None)
    fmt = r.layout.fmt("iI", "qQ")
    segment = r.window(dyn.offset, dyn.filesz, "dynamic segment")
    tags: list[tuple[int, int]] = []
    for i in range(dyn.filesz // fmt.size):
        tag, val = segment.unpack(fmt, dyn.offset + i * fmt.size, "dynamic entry")
        if tag == _DT_NULL:
            break
        tags.append((tag, val))
    strtab_addr = next((v for t, v in tags if t == _DT_STRTAB), None)
    strsz = next((v for t, v in tags if t == _DT_STRSZ), None)
    table = _dynamic_strtab(r, segments, image.sections, strtab_addr, strsz)
    named = (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH)
    if table is None:
        if any(t in named for t, _ in tags):
            raise ElfError("dynamic segment names libraries but has no readable DT_STRTAB")
        return Dynamic(interpreter, None, (), None, None)

    def first(tag: int) -> str | None:
        value = next((v for t, v in tags if t == tag), None)
        return string_at(table, value) if value is not None else None

    needed = tuple(string_at(table, v) for t, v in tags if t == _DT_NEEDED)
    paths = (_DT_RPATH, _DT_RUNPATH)
    search = tuple(string_at(table, v) for t, v in tags if t in paths) if every_path else ()
    return Dynamic(
        interpreter,
        first(_DT_SONAME),
        needed,
        first(_DT_RPATH),
        first(_DT_RUNPATH),
        search,
        tuple(tags),
    )


def _interpreter(r: Reader, segments: Sequence[Segment]) -> str | None:
    for seg in segments:
        if seg.p_type == PT_INTERP:
            raw = bytes(r.span(seg.offset, seg.filesz, "PT_INTERP"))
            return raw.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
    return None


def _dynamic_strtab(
    r: Reader,
    segments: Sequence[Segment],
    sections: Sequence[Section],
    addr: int | None,
    size: int | None,
) -> str | None:
    if addr is None:
        return None
    offset = vaddr_to_offset(segments, addr)
    if offset is None:
        return None
    if size is None or offset + size > r.size:
        # Fall back to the section at that offset, as pyelftools does.
        sec = next((s for s in sections if s.offset == offset), None)
        if sec is None:
            raise ElfError("DT_STRTAB without a usable DT_STRSZ")
        size = sec.size
    return r.strings(offset, size, "dynamic string table")
