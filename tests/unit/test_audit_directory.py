"""The central directory read without zipfile: the same entries as ``ZipFile.infolist()`` on every
archive, zipfile's verdict on every archive it is left to, and the same verdict on mangled bytes."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wheels.audit import directory
from wheels.audit.directory import Entry, NotAZip, read_directory

FIELDS = (
    "filename",
    "orig_filename",
    "flag_bits",
    "compress_type",
    "CRC",
    "compress_size",
    "file_size",
    "header_offset",
    "external_attr",
)


def rows(entries: list[Entry] | list[zipfile.ZipInfo]) -> list[tuple[object, ...]]:
    return [tuple(getattr(e, name) for name in FIELDS) for e in entries]


def zipfile_rows(path: Path) -> list[tuple[object, ...]]:
    with zipfile.ZipFile(path) as zf:
        return rows(zf.infolist())


def raw_name(info: zipfile.ZipInfo) -> bytes:
    return info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")


def varied_zip(target: Path | io.BytesIO, comment: bytes = b"") -> None:
    """Stored and deflated members, names in UTF-8 and in cp437, a directory, a link, extra
    fields, a member comment: what wheels and the tools that write them put in a zip."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/", b"")
        zf.writestr("pkg/__init__.py", b"import os\n" * 50)
        zf.writestr(zipfile.ZipInfo("pkg/stored.bin"), bytes(range(256)) * 8)
        zf.writestr("pkg/caf\u00e9.so", b"\x7fELF" + bytes(300))  # UTF-8, with its flag
        zf.writestr("pkg/old-#.txt", b"cp437")  # its name made cp437 below
        link = zipfile.ZipInfo("pkg/link.so")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "caf\u00e9.so".encode())
        timed = zipfile.ZipInfo("pkg/timed.py")
        timed.extra = b"UT\x05\x00\x01\x00\x00\x00\x00" + b"ux\x0b\x00\x01\x04" + bytes(9)
        timed.comment = b"a member comment"
        zf.writestr(timed, b"pass\n")
        zf.comment = comment
    data = buffer.getvalue().replace(b"old-#", b"old-\x82")  # cp437's e acute, no UTF-8 flag
    if isinstance(target, Path):
        target.write_bytes(data)
    else:
        target.write(data)


@pytest.mark.parametrize("comment", [b"", b"an archive comment"], ids=["plain", "comment"])
def test_plain_archives_are_read_here_with_zipfiles_entries(
    tmp_path: Path, comment: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.whl"
    varied_zip(path, comment)
    expected = zipfile_rows(path)

    def refuse(path: Path) -> list[Entry]:
        raise AssertionError("a plain archive was left to zipfile")

    monkeypatch.setattr(directory, "_by_zipfile", refuse)
    entries = read_directory(path)
    assert rows(entries) == expected and len(entries) == 7
    assert any(not e.raw_name.isascii() and not e.flag_bits & 0x800 for e in entries)  # cp437
    with zipfile.ZipFile(path) as zf:
        assert [e.raw_name for e in entries] == [raw_name(i) for i in zf.infolist()]


def archive_variants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Archives of kinds the quick read leaves to zipfile, all written by zipfile itself."""
    plain = tmp_path / "plain.whl"
    varied_zip(plain)
    out = {}
    prefixed = out["prefixed"] = tmp_path / "prefixed.whl"
    prefixed.write_bytes(b"#!/bin/sh\nexit 0\n" + plain.read_bytes())  # offsets shifted
    with monkeypatch.context() as patch:  # a zip64 end record, as for 65,536 entries or more
        patch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
        varied_zip(out.setdefault("zip64-end", tmp_path / "zip64-end.whl"))
    with monkeypatch.context() as patch:  # zip64 extra fields, as for members of 4 GB or more
        patch.setattr(zipfile, "ZIP64_LIMIT", 100)
        varied_zip(out.setdefault("zip64-sizes", tmp_path / "zip64-sizes.whl"))
    nul = out["nul-name"] = tmp_path / "nul.whl"
    with zipfile.ZipFile(nul, "w") as zf:
        zf.writestr("pkg/a.py", b"")
    data = nul.read_bytes()
    nul.write_bytes(data.replace(b"pkg/a.py", b"pkg/a\0py"))  # zipfile cuts the name there
    return out


def test_other_archives_are_left_to_zipfile_with_the_same_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variants = archive_variants(tmp_path, monkeypatch)
    left: list[Path] = []
    by_zipfile = directory._by_zipfile

    def spy(path: Path) -> list[Entry]:
        left.append(path)
        return by_zipfile(path)

    monkeypatch.setattr(directory, "_by_zipfile", spy)
    for kind, path in variants.items():
        assert rows(read_directory(path)) == zipfile_rows(path), kind
    assert left == list(variants.values())  # every one of them read by zipfile
    nul = read_directory(variants["nul-name"])[0]
    assert (nul.filename, nul.orig_filename, nul.raw_name) == ("pkg/a", "pkg/a\0py", b"pkg/a\0py")


def test_an_entry_that_runs_past_the_directory_is_read_as_zipfile_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "over.whl"
    with zipfile.ZipFile(path, "w") as zf:
        timed = zipfile.ZipInfo("pkg/a.py")
        timed.extra = b"UT\x05\x00\x01\x00\x00\x00\x00"
        zf.writestr(timed, b"pass\n")
    data = bytearray(path.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    data[central + 30] += 8  # its extra field now claims 8 bytes past the directory's end
    path.write_bytes(bytes(data))
    assert rows(read_directory(path)) == zipfile_rows(path)  # (zipfile reads what is there)


def test_what_zipfile_rejects_is_not_a_zip_with_zipfiles_message(tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    for data in (b"", b"not a zip archive at all", b"PK\x05\x06" + bytes(10)):
        path.write_bytes(data)
        with pytest.raises(NotAZip, match="not a zip file"):
            read_directory(path)
    varied_zip(path)
    data = bytearray(path.read_bytes())
    data[data.rindex(b"PK\x01\x02") + 6] = 64  # needs zip version 6.4, later than zipfile reads
    path.write_bytes(bytes(data))
    with pytest.raises(NotAZip, match=r"zip file version 6\.4"):
        read_directory(path)
    varied_zip(path)
    data = bytearray(path.read_bytes())
    ut = data.rindex(b"UT\x05\x00")  # the central directory's copy of an extra field
    data[ut + 2] = 0x40  # now longer than the extra field that holds it
    path.write_bytes(bytes(data))
    with pytest.raises(NotAZip, match="Corrupt extra field"):
        read_directory(path)
    with pytest.raises(OSError):
        read_directory(tmp_path / "missing.whl")


def seed() -> bytes:
    buffer = io.BytesIO()
    varied_zip(buffer, comment=b"c")
    return buffer.getvalue()


SEED = seed()
END = SEED.rindex(b"PK\x05\x06")
TAIL = int.from_bytes(SEED[END + 16 : END + 20], "little")  # where the central directory starts


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("directory")


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(st.tuples(st.integers(TAIL, len(SEED) - 1), st.integers(0, 255)), max_size=6),
    st.integers(0, 40),
)
def test_mangled_directories_get_zipfiles_verdict(
    scratch: Path, flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(SEED)
    for offset, value in flips:
        data[offset] = value
    path = scratch / "m.whl"
    path.write_bytes(bytes(data[: len(data) - cut]))
    try:
        expected: list[tuple[object, ...]] | None = zipfile_rows(path)
    except Exception:  # (any of zipfile's errors: the verdict is that it fails)
        expected = None
    try:
        found: list[tuple[object, ...]] | None = rows(read_directory(path))
    except NotAZip:
        found = None
    assert found == expected
