"""The quick read of a zip's central directory (wheels.audit.raw.largest_member): the same task
as zipfile's directory gives for the largest member and the same totals for the rest, or None
where it leaves the zip to zipfile."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from wheels.audit.raw import Largest, Task, largest_member


def make_zip(path: Path, members: dict[str, bytes], comment: bytes = b"") -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.comment = comment
    return path


def zipfile_largest(path: Path) -> Largest:
    """What the audit derives from zipfile: the first member of the largest inflated size, and
    what the other entries hold."""
    with zipfile.ZipFile(path) as zf:
        infos = list(enumerate(zf.infolist()))
    files = [(i, x) for i, x in infos if not x.filename.endswith("/")]
    index, info = max(files, key=lambda p: (p[1].file_size, -p[0]))
    rest = sum(x.file_size for _, x in infos) - info.file_size
    second = max((x.file_size for i, x in files if i != index), default=0)
    raw_name = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
    task = Task(
        index,
        info.filename,
        raw_name,
        info.header_offset,
        info.compress_size,
        info.file_size,
        info.compress_type,
        info.flag_bits,
        "sha256",
    )
    return Largest(task, rest, len(infos) - 1, second)


def test_the_largest_member_is_the_task_zipfile_gives(tmp_path: Path) -> None:
    members = {
        "pkg/__init__.py": b"",
        "pkg/small.so": b"x" * 500,
        "pkg/\u00e9big.so": bytes(range(256)) * 400,  # a UTF-8 name
        "pkg/tie.so": bytes(range(256)) * 400,  # as big: the first one wins
        "pkg.dist-info/RECORD": b"",
    }
    path = make_zip(tmp_path / "a.whl", members, comment=b"a comment at the end")
    found = largest_member(path)
    assert found == zipfile_largest(path)
    assert found is not None and found.task.name == "pkg/\u00e9big.so"
    assert (found.rest_bytes, found.rest_members, found.second) == (500 + 256 * 400, 4, 256 * 400)


def test_directories_and_symlinks_are_not_members(tmp_path: Path) -> None:
    path = tmp_path / "b.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/", b"")
        link = zipfile.ZipInfo("pkg/link.so")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, b"target-name-longer-than-the-file" * 10)
        zf.writestr("pkg/real.so", b"abc")
    found = largest_member(path)
    assert found is not None and found.task.name == "pkg/real.so"
    assert (found.rest_bytes, found.rest_members) == (320, 2)  # the link's bytes are counted


def test_archives_it_does_not_read_are_left_to_zipfile(tmp_path: Path) -> None:
    plain = make_zip(tmp_path / "c.whl", {"pkg/a.so": b"a" * 100})
    prefixed = tmp_path / "prefixed.whl"
    prefixed.write_bytes(b"#!/bin/sh\nexit 0\n" + plain.read_bytes())  # offsets shifted
    assert zipfile.is_zipfile(prefixed) and largest_member(prefixed) is None
    not_zip = tmp_path / "d.whl"
    not_zip.write_bytes(b"not a zip archive at all")
    assert largest_member(not_zip) is None
    assert largest_member(tmp_path / "missing.whl") is None
    empty = make_zip(tmp_path / "e.whl", {})
    assert largest_member(empty) is None
