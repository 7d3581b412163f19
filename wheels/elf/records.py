"""ELF data as plain JSON-able records, for the audit cache: no pickle, nothing executable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wheels.elf.info import FIELD_NAMES, ElfInfo, VersionNeed

if TYPE_CHECKING:
    from collections.abc import Mapping


def to_record(info: ElfInfo) -> dict[str, object]:
    record: dict[str, object] = {}
    for key in FIELD_NAMES:
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


_SET_FIELDS = frozenset({"hidden_versioned", "entry_points"})


def from_record(record: Mapping[str, object]) -> ElfInfo:
    """Inverse of :func:`to_record`; a record that does not fit raises ValueError or TypeError."""
    values: dict[str, object] = {}
    for key in FIELD_NAMES:
        value = record[key]
        if key == "version_needs":
            values[key] = tuple(VersionNeed(str(f), tuple(map(str, v))) for f, v in _rows(value))
        elif isinstance(value, list):
            items = tuple(str(v) for v in value)
            values[key] = frozenset(items) if key in _SET_FIELDS else items
        elif value is None or isinstance(value, (bool, int, str)):
            values[key] = value
        else:
            raise TypeError(f"unexpected {type(value).__name__} for {key}")
    info = ElfInfo(**values)  # type: ignore[arg-type]
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
