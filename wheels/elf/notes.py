"""Note sections: the x86-64 ISA level of the GNU property note, and where the GNU build-id is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wheels.elf.reader import SHT_NOTE, ElfError, Reader, Section, opened

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from wheels.elf.reader import Data

_ET_CORE = 4
_NT_GNU_BUILD_ID, _NT_GNU_PROPERTY_TYPE_0 = 3, 5
_GNU_PROPERTY_X86_ISA_1_NEEDED = 0xC0008002


def _note_sections(r: Reader, sections: Sequence[Section]) -> Iterator[tuple[Section, bytes]]:
    for sec in sections:
        if sec.sh_type == SHT_NOTE and sec.size:
            yield sec, bytes(r.span(sec.offset, sec.size, "note section"))


def _notes(r: Reader, notes: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(type, name offset, descriptor offset, descriptor size) of each note, in order; name and
    descriptor are 4-byte aligned (as pyelftools and auditwheel read them)."""
    header = r.layout.fmt("III", "III")
    off, end = 0, len(notes)
    while off + 12 < end:
        namesz, descsz, ntype = header.unpack_from(notes, off)
        name_at = off + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        off = desc_at + ((descsz + 3) & ~3)
        yield ntype, name_at, desc_at, descsz


def isa_level(r: Reader, sections: Sequence[Section]) -> tuple[str | None, bool]:
    """x86-64 ISA level from GNU property notes, exactly as auditwheel reads it."""
    ext: str | None = None
    error = False
    for _, notes in _note_sections(r, sections):
        found, bad = _isa_in_notes(r, notes)
        ext, error = found or ext, error or bad
    return ext, error


def _isa_in_notes(r: Reader, notes: bytes) -> tuple[str | None, bool]:
    """The first GNU property note of one note section (annobin sections hold thousands)."""
    prop = r.layout.fmt("II", "II")
    word = r.layout.fmt("I", "I")
    align = 8 if r.cls == 64 else 4
    for ntype, name_at, desc_at, descsz in _notes(r, notes):
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


def _cut(data: bytes, offset: int, size: int, what: str = "GNU property") -> bytes:
    if offset + size > len(data):
        raise ElfError(f"{what} at offset {offset} runs past its note section")
    return data[offset : offset + size]


def build_id_span(source: Data | Path) -> tuple[int, int] | None:
    """(file offset, size) of the GNU build-id: the descriptor of the first NT_GNU_BUILD_ID
    note of any note section; None when there is none. Raises :class:`ElfError` when
    ``source`` is not a readable ELF file."""
    with opened(source) as image:
        if image.header.elf_type == _ET_CORE:  # where note type 3 means something else
            return None
        for sec, notes in _note_sections(image.reader, image.sections):
            for ntype, _, desc_at, descsz in _notes(image.reader, notes):
                if ntype == _NT_GNU_BUILD_ID:
                    _cut(notes, desc_at, descsz, "build-id")
                    return sec.offset + desc_at, descsz
    return None
