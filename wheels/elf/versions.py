"""The GNU symbol-version tables: what an object needs (DT_VERNEED) and defines (DT_VERDEF)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.elf.info import VersionNeed
from wheels.elf.reader import Reader, Section, linked_strtab, string_at

if TYPE_CHECKING:
    from collections.abc import Sequence

_SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE


@dataclass(frozen=True)
class Versions:
    """The GNU symbol-version tables of one ELF file."""

    needs: tuple[VersionNeed, ...]
    need_by_index: dict[int, str]
    defs: tuple[str, ...]
    def_by_index: dict[int, str]


def _read_verneed(r: Reader, sec: Section, table: str) -> tuple[list[VersionNeed], dict[int, str]]:
    vn = r.layout.fmt("HHIII", "HHIII")
    vna = r.layout.fmt("IHHII", "IHHII")
    w = r.window(sec.offset, sec.size, "version needs")
    limit = sec.size // vn.size + 1
    needs: list[VersionNeed] = []
    by_index: dict[int, str] = {}
    off = sec.offset
    for _ in range(limit):
        _ver, cnt, file_off, aux, nxt = w.unpack(vn, off, "version need entry")
        names: list[str] = []
        aoff = off + aux
        for _ in range(min(cnt, limit * 2)):
            _hash, _flags, other, name_off, anext = w.unpack(vna, aoff, "version need aux")
            name = string_at(table, name_off)
            names.append(name)
            by_index[other & 0x7FFF] = name
            if anext == 0:
                break
            aoff += anext
        needs.append(VersionNeed(string_at(table, file_off), tuple(names)))
        if nxt == 0:
            break
        off += nxt
    return needs, by_index


def _read_verdef(r: Reader, sec: Section, table: str) -> tuple[list[str], dict[int, str]]:
    vd = r.layout.fmt("HHHHIII", "HHHHIII")
    vda = r.layout.fmt("II", "II")
    w = r.window(sec.offset, sec.size, "version definitions")
    limit = sec.size // vd.size + 1
    defs: list[str] = []
    by_index: dict[int, str] = {}
    off = sec.offset
    for _ in range(limit):
        _ver, flags, ndx, cnt, _hash, aux, nxt = w.unpack(vd, off, "version definition")
        if cnt:
            name_off, _ = w.unpack(vda, off + aux, "version definition aux")
            name = string_at(table, name_off)
            by_index[ndx & 0x7FFF] = name
            if not flags & 1:  # VER_FLG_BASE names the file itself, not a version
                defs.append(name)
        if nxt == 0:
            break
        off += nxt
    return defs, by_index


def read_versions(r: Reader, sections: Sequence[Section], table: str | None) -> Versions:
    needs: list[VersionNeed] = []
    need_idx: dict[int, str] = {}
    defs: list[str] = []
    def_idx: dict[int, str] = {}
    for sec in sections:
        if sec.sh_type == _SHT_GNU_VERNEED and sec.size:
            t = table if table is not None else linked_strtab(r, sections, sec)
            n, i = _read_verneed(r, sec, t)
            needs += n
            need_idx.update(i)
        elif sec.sh_type == _SHT_GNU_VERDEF and sec.size:
            t = table if table is not None else linked_strtab(r, sections, sec)
            d, i = _read_verdef(r, sec, t)
            defs += d
            def_idx.update(i)
    return Versions(tuple(needs), need_idx, tuple(defs), def_idx)
