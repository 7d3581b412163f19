"""The dynamic tables as ld.so finds them: through PT_DYNAMIC (DT_SYMTAB, DT_STRTAB, DT_VERSYM,
DT_VERNEED, DT_VERDEF and the hash table that sizes the symbol table), not through the section
header table, which the loader never reads.

Where the section table agrees with PT_DYNAMIC (every file a linker wrote) the two views are
the same tables; where it does not (a section table overwritten, stripped or lying), the
audit reads the loader's view, so that a broken section table changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wheels.elf.reader import ElfError, Image, Section, vaddr_to_offset
from wheels.elf.symbols import SHT_GNU_VERSYM

if TYPE_CHECKING:
    from collections.abc import Sequence

_DT_HASH, _DT_STRTAB, _DT_SYMTAB, _DT_STRSZ = 4, 5, 6, 10
_DT_GNU_HASH, _DT_VERSYM = 0x6FFFFEF5, 0x6FFFFFF0
_DT_VERDEF, _DT_VERNEED = 0x6FFFFFFC, 0x6FFFFFFE
_SHT_STRTAB, _SHT_DYNSYM = 3, 11
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
_BY_TAG = {_DT_SYMTAB: _SHT_DYNSYM, _DT_VERSYM: SHT_GNU_VERSYM, _DT_VERNEED: _SHT_GNU_VERNEED}


def disagrees(image: Image, tags: Sequence[tuple[int, int]]) -> bool:
    """Does the section table lack a table PT_DYNAMIC points the loader to?"""
    for tag, value in tags:
        kind = _BY_TAG.get(tag)
        if kind is None:
            continue
        offset = vaddr_to_offset(image.segments, value)
        if not any(s.sh_type == kind and s.offset == offset for s in image.sections):
            return True
    return False


def loader_sections(image: Image, tags: Sequence[tuple[int, int]]) -> list[Section]:
    """Section records for the tables PT_DYNAMIC names, the string table first (every other
    links to it); raises :class:`ElfError` for a table that is not in the file."""
    found = dict(tags)  # (the first of each tag, as the loader takes it)
    r = image.reader
    strtab = _offset(image, found.get(_DT_STRTAB), "DT_STRTAB")
    out = [Section(0, _SHT_STRTAB, strtab, found.get(_DT_STRSZ, 0), 0, 0)]
    entry = 24 if r.cls == 64 else 16
    count = 0
    if _DT_SYMTAB in found:
        count = _symbol_count(image, found)
        symtab = _offset(image, found[_DT_SYMTAB], "DT_SYMTAB")
        out.append(Section(0, _SHT_DYNSYM, symtab, count * entry, 0, entry))
    if _DT_VERSYM in found:
        versym = _offset(image, found[_DT_VERSYM], "DT_VERSYM")
        out.append(Section(0, SHT_GNU_VERSYM, versym, count * 2, 0, 2))
    for tag, kind in ((_DT_VERNEED, _SHT_GNU_VERNEED), (_DT_VERDEF, _SHT_GNU_VERDEF)):
        if tag in found:
            offset = _offset(image, found[tag], "DT_VERNEED/DT_VERDEF")
            out.append(Section(0, kind, offset, r.size - offset, 0, 0))  # walked to its end
    return out


def _offset(image: Image, vaddr: int | None, what: str) -> int:
    offset = vaddr_to_offset(image.segments, vaddr) if vaddr is not None else None
    if offset is None:
        raise ElfError(f"{what} points outside every PT_LOAD segment")
    return offset


def _symbol_count(image: Image, found: dict[int, int]) -> int:
    """How many dynamic symbols there are, as the loader bounds them: DT_HASH's chain count,
    else the last chain of DT_GNU_HASH."""
    r = image.reader
    if _DT_HASH in found:
        at = _offset(image, found[_DT_HASH], "DT_HASH")
        return int(r.unpack(r.layout.fmt("II", "II"), at, "DT_HASH header")[1])
    if _DT_GNU_HASH not in found:
        raise ElfError("the section table does not match PT_DYNAMIC, which has no hash table")
    at = _offset(image, found[_DT_GNU_HASH], "DT_GNU_HASH")
    words = r.layout.fmt("IIII", "IIII")
    nbuckets, symoffset, bloom, _shift = r.unpack(words, at, "DT_GNU_HASH header")
    buckets = at + 16 + bloom * (8 if r.cls == 64 else 4)
    word = r.layout.fmt("I", "I")
    last = max(
        (int(r.unpack(word, buckets + 4 * i, "DT_GNU_HASH bucket")[0]) for i in range(nbuckets)),
        default=0,
    )
    if last < symoffset:
        return int(symoffset)
    chains = buckets + 4 * nbuckets
    while not int(r.unpack(word, chains + 4 * (last - symoffset), "DT_GNU_HASH chain")[0]) & 1:
        last += 1
    return last + 1
