"""A long export list's lookups (wheels.elf.info.ExportIndex) and exported names joined in
chunks (wheels.elf.symbols.EXPORT_CHUNK) answer as the plain set and the one join do, on this
host's libraries."""

from __future__ import annotations

import pytest

from tests.unit.test_elf_lookup import HOST_LIBRARIES, host_lib, queries
from wheels.elf import info as info_module
from wheels.elf import symbols
from wheels.elf.decode import read_elf
from wheels.elf.info import ExportIndex


@pytest.mark.parametrize("name", HOST_LIBRARIES)
def test_lookups_through_an_export_index_answer_as_the_set_of_names(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = host_lib(name).read_bytes()
    plain = read_elf(data)
    asked = queries(plain)
    expected = [plain.defines(n, v) for n, v in asked]
    assert not isinstance(plain._versions, ExportIndex)  # (a short list: a dict)
    monkeypatch.setattr(info_module, "INDEX_ABOVE", 0)
    indexed = read_elf(data)
    assert isinstance(indexed._versions, ExportIndex)
    assert [indexed.defines(n, v) for n, v in asked] == expected
    assert True in expected and False in expected


def test_an_export_index_finds_exactly_the_versions_of_the_names_of_its_list() -> None:
    names = ["f", "ff", "", "g@x", "f", "\xe9t\xe9"]
    versions = "\2\0\0\3\4\5"
    index = ExportIndex("\0".join(names), versions)
    for probe in [*names, "fff", "g", "x", "f\0ff", "\xe9t"]:
        expected = "".join(v for n, v in zip(names, versions, strict=True) if n == probe)
        assert index.get(probe, "") == expected, probe
    assert ExportIndex("", "").get("", "") == "" and ExportIndex("", "").get("a", "") == ""


@pytest.mark.parametrize("name", HOST_LIBRARIES)
def test_exported_names_joined_in_chunks_are_the_names_joined_once(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = host_lib(name).read_bytes()
    once = read_elf(data)
    monkeypatch.setattr(symbols, "EXPORT_CHUNK", 7)
    chunked = read_elf(data)
    assert once.export_count > 7 and chunked == once
