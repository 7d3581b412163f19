"""The CUDA device code of an ELF file as the audit keeps it: read from the bytes the audit
already holds (:func:`scan`), merged into distinct images (:func:`distinct`), stored in the
audit cache as plain data (:func:`to_record`, :func:`from_record`) and named for reports
(:func:`summary`).

Only the fat binary headers are read (:func:`wheels.cuda.fatbin.read_fatbin_at`): a library with
hundreds of megabytes of kernels costs a few reads per image, not a copy of its section.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import TYPE_CHECKING

from wheels.cuda import FATBIN_SECTIONS
from wheels.cuda.fatbin import (
    DeviceCode,
    FatbinEntry,
    FatbinError,
    Seen,
    combine,
    read_fatbin_at,
)
from wheels.elf import ElfError, section_spans

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from wheels.elf import ByteSource

_FIELDS = tuple(f.name for f in fields(FatbinEntry))
_INTS = ("arch", "size", "uncompressed_size", "offset", "kind_code", "count")


def read(
    content: ByteSource,
    seen: Seen | None = None,
    spans: Mapping[str, tuple[int, int]] | None = None,
) -> DeviceCode | None:
    """The device code of the ELF file in ``content``; None when it has no fat binary section.
    ``seen``: what :class:`wheels.cuda.tap.FatbinTap` kept of the file as it was inflated;
    ``spans``: its fat binary sections, where the caller has located them
    (:func:`wheels.elf.section_spans`). Raises :class:`FatbinError` or :class:`ElfError` on a
    section that cannot be read."""
    if spans is None:
        spans = section_spans(content, FATBIN_SECTIONS)
    if not spans:
        return None
    return combine(read_fatbin_at(content, o, n, s, seen) for s, (o, n) in spans.items())


NO_SECTIONS = "its section header table cannot be read, so its CUDA device code is not known"


def scan(
    content: ByteSource,
    seen: Seen | None = None,
    spans: Mapping[str, tuple[int, int]] | None = None,
) -> tuple[DeviceCode | None, str | None]:
    """(distinct device code, None), or (None, why) when a fat binary cannot be read."""
    try:
        code = read(content, seen, spans)
    except FatbinError as exc:
        return None, f"its CUDA fat binary cannot be read: {exc}"
    except ElfError as exc:  # the section table that locates .nv_fatbin, not a fat binary
        return None, f"{NO_SECTIONS}: {exc}"
    return (distinct(code) if code is not None else None), None


def _identity(entry: FatbinEntry) -> tuple[object, ...]:
    return (
        entry.kind,
        entry.arch,
        entry.variant,
        entry.ptx_version,
        entry.code_version,
        entry.compression,
        entry.relocatable,
        entry.debug,
        entry.kind_code,
    )


def distinct(code: DeviceCode) -> DeviceCode:
    """``code`` with equal images (same kind, target, versions, compression, section) merged:
    a library of 400 kernel objects for two architectures has a handful, each counting its
    copies and summing their sizes."""
    first: dict[tuple[object, ...], FatbinEntry] = {}
    sums: dict[tuple[object, ...], list[int]] = {}  # (summed: one record made for each image)
    for entry in code.entries:
        key = _identity(entry)
        summed = sums.get(key)
        if summed is None:
            first[key] = entry
            sums[key] = [entry.count, entry.size, entry.uncompressed_size, 1]
        else:
            summed[0] += entry.count
            summed[1] += entry.size
            summed[2] += entry.uncompressed_size
            summed[3] += 1
    merged = (
        e if sums[k][3] == 1 else replace(e, count=sums[k][0], size=sums[k][1],
                                         uncompressed_size=sums[k][2])
        for k, e in first.items()
    )  # fmt: skip
    return DeviceCode(tuple(merged), code.sections)


def to_record(code: DeviceCode) -> dict[str, object]:
    """``code`` as JSON-able data: its sections and one row of field values per entry."""
    rows = [[_plain(getattr(e, f)) for f in _FIELDS] for e in code.entries]
    return {"sections": list(code.sections), "entries": rows}


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def from_record(record: Mapping[str, object]) -> DeviceCode:
    """Inverse of :func:`to_record`; a record that does not fit raises TypeError or
    ValueError (the cache treats either as a miss)."""
    sections, rows = record["sections"], record["entries"]
    if not isinstance(sections, list) or not isinstance(rows, list):
        raise TypeError("device code record is not two lists")
    return DeviceCode(tuple(_entry(row) for row in rows), tuple(map(str, sections)))


def _entry(row: object) -> FatbinEntry:
    if not isinstance(row, list) or len(row) != len(_FIELDS):
        raise ValueError("malformed device code entry")
    values = dict(zip(_FIELDS, row, strict=True))
    if not all(isinstance(values[k], int) for k in _INTS) or not isinstance(values["kind"], str):
        raise TypeError("device code entry of the wrong types")
    for key in ("ptx_version", "code_version"):
        value = values[key]
        values[key] = tuple(value) if isinstance(value, list) else value
    return FatbinEntry(**values)


def summary(code: DeviceCode) -> str:
    """``SASS sm_80, sm_90; PTX compute_90 (PTX ISA 9.0)``: what the CUDA runtime loads from
    the file, plus its relocatable code when it has some."""
    loaded = code.loaded()
    if loaded.entries and all(e.relocatable for e in loaded.entries):
        return f"relocatable only (for a device link): {_listing(loaded.entries)}"
    text = _listing(loaded.entries)
    kept = {id(e) for e in loaded.entries}
    rest = [e for e in code.entries if id(e) not in kept]
    if rest:
        text += f"; relocatable (for a device link): {_listing(rest)}"
    return text


def _listing(entries: Iterable[FatbinEntry]) -> str:
    entries = list(entries)
    code = DeviceCode(tuple(entries))
    sass = ", ".join(code.sass_archs) or "none"
    ptx = ", ".join(f"{t}{_isa(entries, t)}" for t in code.ptx_archs) or "none"
    return f"SASS {sass}; PTX {ptx}"


def _isa(entries: Iterable[FatbinEntry], target: str) -> str:
    versions = sorted(
        {e.ptx_version for e in entries if e.kind == "ptx" and e.target == target and e.ptx_version}
    )
    return f" (PTX ISA {', '.join(f'{v[0]}.{v[1]}' for v in versions if v)})" if versions else ""
