"""Inflating members (wheels.inflate, wheels.audit.members): libdeflate for members read in
one call, ISA-L for streams kept whole (a big member hashed beside inflating it), zlib-ng for
streams re-inflated from saved states, zlib when any is missing, the same bytes and digests
every way, and a lying zip directory caught whichever library inflates."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import zipfile
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from wheels import inflate
from wheels.audit.digests import Digest
from wheels.audit.directory import read_directory
from wheels.audit.members import scan_member
from wheels.audit.raw import RawFile, SizeMismatch, Task, open_raw, read_raw, task_for
from wheels.audit.sparse import Sparse, Spooled

# A member mapped from the wheel (64 MB and up), one read in one call, one stored.
SIZES = {"big.bin": (66 << 20), "mid.so": 3 << 20, "small.txt": 5000}


def content(name: str, size: int) -> bytes:
    """Text-like bytes (deflate shrinks them a few times), the same for the same name."""
    rng = random.Random(name)
    words = [rng.randbytes(rng.randint(3, 12)) for _ in range(4096)]
    chunk = b"".join(rng.choice(words) for _ in range(40_000))
    return (chunk * (size // len(chunk) + 1))[:size]


def record_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inflate") / "members.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, size in SIZES.items():
            zf.writestr(name, content(name, size), compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("stored.bin", content("stored.bin", 4096), compress_type=zipfile.ZIP_STORED)
    return path


def digests(path: Path) -> dict[str, str | None]:
    """Each member's digest as the audit computes it (None: unreadable)."""
    out: dict[str, str | None] = {}
    with path.open("rb") as fh:
        for index, info in enumerate(read_directory(path)):
            task = task_for(index, info, "sha256")
            scan = scan_member(task, read_raw(fh.fileno(), task), path, spare_core=True)
            out[info.filename] = scan.digest
    return out


# Run in a fresh interpreter where the fast libraries cannot be imported, as if not installed.
WITHOUT_FAST = """
import json, sys
sys.modules["deflate"] = None
sys.modules["zlib_ng"] = None
sys.modules["isal"] = None
from pathlib import Path
from tests.unit.test_audit_inflate import digests
from wheels import inflate
print(json.dumps({"libraries": inflate.libraries(), "digests": digests(Path(sys.argv[1]))}))
"""


def without_fast_libraries(path: Path, **env: str) -> dict[str, dict[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_FAST, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )
    result: dict[str, dict[str, str]] = json.loads(proc.stdout)
    return result


def test_every_member_has_its_own_digest_whichever_library_inflates_it(archive: Path) -> None:
    expected = {n: record_digest(content(n, s)) for n, s in SIZES.items()}
    expected["stored.bin"] = record_digest(content("stored.bin", 4096))
    assert digests(archive) == expected
    fallback = without_fast_libraries(archive)
    assert fallback["digests"] == expected


def test_without_the_fast_libraries_zlib_inflates_both_ways(archive: Path) -> None:
    zlib_only = {"one call": "zlib", "stream": "zlib", "one-way stream": "zlib"}
    assert without_fast_libraries(archive)["libraries"] == zlib_only
    forced = without_fast_libraries(archive, INFINI_STACK_INFLATE="zlib")
    assert forced["libraries"] == zlib_only


@pytest.mark.skipif(inflate.ONE_CALL_NAME is None, reason="libdeflate (deflate) not installed")
def test_the_fast_libraries_are_used_when_installed() -> None:
    expected = {"one call": "libdeflate", "stream": "zlib-ng", "one-way stream": "ISA-L"}
    assert inflate.libraries() == expected


def test_a_big_member_is_streamed_and_kept_where_read_never_inflated_whole(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members

    calls: list[int] = []
    one_call = members.inflate_one_call
    monkeypatch.setattr(
        members, "inflate_one_call", lambda raw, size: calls.append(size) or one_call(raw, size)
    )
    threads: list[str] = []
    digest_type = Digest

    def spy(algo: str, size: int, background: bool) -> Digest:
        threads.append("beside" if background else "after")
        return digest_type(algo, size, background)

    monkeypatch.setattr(members, "Digest", spy)
    index, info = next(
        (i, x) for i, x in enumerate(read_directory(archive)) if x.filename == "big.bin"
    )
    task = task_for(index, info, "sha256")
    expected = content("big.bin", SIZES["big.bin"])
    for spare_core in (True, False):
        streamed, digest = members.inflate(task, open_raw(archive, task), archive, spare_core)
        assert calls == [] and digest == record_digest(expected)  # streamed
        assert not isinstance(streamed, bytes | bytearray) and streamed.head(4) == expected[:4]
        # Not an ELF file: its first bytes were kept, and they are all it needs; the rest is
        # inflated again in steps into a temporary file, never in one call into memory.
        assert bytes(streamed.range(0, len(expected))) == expected
        assert isinstance(streamed._whole, Spooled) and not streamed.spans and calls == []
        streamed.close()
    assert threads == ["beside", "after"]  # hashed on a second thread given a free core


def test_a_member_that_inflates_to_other_than_its_stated_size_is_unreadable(
    archive: Path,
) -> None:
    info = next(x for x in read_directory(archive) if x.filename == "mid.so")
    with archive.open("rb") as fh:
        raw = read_raw(fh.fileno(), task_for(0, info, "sha256"))
        for lie in (info.file_size - 1, info.file_size + 1):
            info.file_size = lie
            scan = scan_member(task_for(0, info, "sha256"), raw, archive, spare_core=False)
            assert scan.read_error is not None and scan.digest is None, lie
            assert str(lie) in scan.read_error  # "holds N bytes, the zip directory says LIE"
            assert scan.read_error.startswith(("holds ", "inflates past "))
            assert scan.read_code == "size-mismatch"


def test_corrupt_deflate_data_is_a_member_error_not_a_crash(archive: Path) -> None:
    info = next(x for x in read_directory(archive) if x.filename == "mid.so")
    with archive.open("rb") as fh:
        raw = bytearray(read_raw(fh.fileno(), task_for(0, info, "sha256")))
    raw[len(raw) // 2 : len(raw) // 2 + 64] = bytes(64)
    scan = scan_member(task_for(0, info, "sha256"), bytes(raw), archive, spare_core=False)
    assert scan.read_error is not None and scan.digest is None
    assert scan.read_error.startswith(
        ("corrupt deflate data", "holds ", "inflates past ", "deflate data ends")
    )


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\x03\x00", None),  # zlib's empty stream
        (b"\x01\x00\x00\xff\xff", None),  # an empty stored block
        (b"\x02\x00", "deflate data ends early"),  # an empty block, not the final one
        (b"K\x04\x00", "inflates past"),  # zlib's "a", where nothing is stated
        (b"\x07\x00", "corrupt deflate data"),  # a reserved block type
    ],
)
def test_an_empty_member_is_empty_only_when_its_stream_says_so(
    archive: Path, raw: bytes, error: str | None
) -> None:
    info = next(x for x in read_directory(archive) if x.filename == "mid.so")
    info.file_size, info.compress_size = 0, len(raw)
    scan = scan_member(task_for(0, info, "sha256"), raw, archive, spare_core=False)
    if error is None:
        assert scan.read_error is None and scan.size == 0
        expected = base64.urlsafe_b64encode(hashlib.sha256(b"").digest()).rstrip(b"=").decode()
        assert scan.digest == expected
    else:
        assert scan.read_error is not None and scan.read_error.startswith(error), scan.read_error


def audit_threads() -> list[str]:
    """The audit's helper threads still running (the hash beside, the reader ahead)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("audit-")]


def big_task(archive: Path, file_size: int | None = None) -> Task:
    index, info = next(
        (i, x) for i, x in enumerate(read_directory(archive)) if x.filename == "big.bin"
    )
    if file_size is not None:
        info.file_size = file_size
    return task_for(index, info, "sha256")


def test_a_big_member_hashed_beside_is_read_ahead_and_leaves_no_thread_behind(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members

    starts: list[int] = []
    ahead = RawFile.ahead

    def spy(self: RawFile, pos: int, size: int) -> Generator[bytes, None, None]:
        starts.append(pos)
        return ahead(self, pos, size)

    monkeypatch.setattr(RawFile, "ahead", spy)
    task = big_task(archive)
    expected = content("big.bin", SIZES["big.bin"])
    streamed, digest = members.inflate(task, open_raw(archive, task), archive, spare_core=True)
    assert starts == [0] and digest == record_digest(expected)  # read on a helper thread
    assert isinstance(streamed, Sparse)  # kept where read
    assert bytes(streamed.range(0, len(expected))) == expected  # (not ELF: read again)
    streamed.close()
    assert audit_threads() == []
    _, digest = members.inflate(task, open_raw(archive, task), archive, spare_core=False)
    assert starts == [0] and digest == record_digest(expected)  # no free core: read here


def test_a_big_member_that_lies_about_its_size_stops_its_reader_and_hash_threads(
    archive: Path,
) -> None:
    from wheels.audit import members

    for lie in (SIZES["big.bin"] - (1 << 20), SIZES["big.bin"] + 1):
        task = big_task(archive, lie)
        with pytest.raises(SizeMismatch, match=str(lie)):
            members.inflate(task, open_raw(archive, task), archive, spare_core=True)
        assert audit_threads() == []


def test_reading_ahead_gives_the_bytes_read_in_steps_and_stops_when_closed(
    archive: Path,
) -> None:
    raw = open_raw(archive, big_task(archive))
    assert isinstance(raw, RawFile)
    assert b"".join(raw.ahead(100, 4096)) == b"".join(raw.steps(4096, 100))
    early = raw.ahead(0, 4096)  # the reader fills its queue and waits to hand a step over
    assert next(early) == raw.read(0, 4096)
    early.close()  # as the inflater stopping at a lie: the reader is let go, then joined
    assert audit_threads() == []
    raw.close()


def test_what_the_reader_ahead_raises_is_raised_to_its_consumer(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = open_raw(archive, big_task(archive))
    assert isinstance(raw, RawFile)
    read = RawFile.read

    def failing(self: RawFile, pos: int, size: int) -> bytes:
        if pos >= 2 * size:
            raise MemoryError("no room for the third step")
        return read(self, pos, size)

    monkeypatch.setattr(RawFile, "read", failing)
    steps = raw.ahead(0, 4096)
    assert next(steps) and next(steps)  # the two steps read before it failed
    with pytest.raises(MemoryError, match="third step"):
        next(steps)  # not a wait for a step that never comes
    assert audit_threads() == []
    raw.close()


def test_what_a_tap_raises_beside_the_inflating_thread_is_raised_on_it() -> None:

    def broken(part: bytes) -> None:
        raise ValueError(f"tap broke on {len(part)} bytes")

    digest = Digest("sha256", 6, background=True)
    digest.also.append(broken)
    digest.add(b"abc")
    digest.add(b"def")  # taken to the end: the inflating thread never waits on a failed tap
    with pytest.raises(ValueError, match="tap broke on 3 bytes"):
        digest.finish()
    failed_first = Digest("sha256", 3, background=True)
    failed_first.also.append(broken)
    failed_first.add(b"abc")
    failed_first.stop()  # the inflating thread's own error is the one told: nothing raised here
    assert audit_threads() == []


@pytest.mark.parametrize("sparse", [True, False], ids=["kept-where-read", "saved-states"])
def test_a_big_member_read_in_steps_from_the_wheel_has_the_same_digest(
    archive: Path, sparse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members, raw

    if not sparse:  # too big to keep: streamed from saved states
        for module in (members, raw):
            monkeypatch.setattr(module, "SNAPSHOT_ABOVE", SIZES["big.bin"] - 1)
    index, info = next(
        (i, x) for i, x in enumerate(read_directory(archive)) if x.filename == "big.bin"
    )
    task = task_for(index, info, "sha256")
    raw = open_raw(archive, task)
    assert isinstance(raw, RawFile)  # neither read whole nor mapped
    assert len(raw) == info.compress_size
    scan = scan_member(task, raw, archive, spare_core=False)
    assert scan.digest == record_digest(content("big.bin", SIZES["big.bin"]))
    assert scan.size == info.file_size and scan.read_error is None


def test_a_member_read_whole_is_its_content_when_it_can_only_be_streamed(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members

    info = next(x for x in read_directory(archive) if x.filename == "mid.so")
    task = task_for(0, info, "sha256")
    with archive.open("rb") as fh:
        raw = read_raw(fh.fileno(), task)
    expected = content("mid.so", SIZES["mid.so"])
    assert members.content_of(task, raw, archive) == expected  # in one call
    monkeypatch.setattr(members, "_inflate_fast", lambda task, raw: None)
    monkeypatch.setattr(members, "ONE_SHOT_BELOW", 0)  # (3 MB: streamed, then joined)
    assert members.content_of(task, raw, archive) == expected


def _bomb(tmp_path: Path, inflated: int, stated: int) -> Path:
    """A wheel whose member of ``inflated`` zeros states ``stated`` bytes in both headers."""
    import struct
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = b"".join(packer.compress(bytes(1 << 20)) for _ in range(inflated >> 20))
    raw += packer.flush()
    crc = 0  # what a liar would write; the size is caught before the CRC matters
    name = b"demo/zeros.bin"
    local = struct.pack(
        "<4sHHHHHIIIHH", b"PK\3\4", 20, 0, 8, 0, 0, crc, len(raw), stated, len(name), 0
    )
    central = struct.pack(
        "<4sHHHHHHIIIHHHHHII",
        b"PK\1\2",
        20,
        20,
        0,
        8,
        0,
        0,
        crc,
        len(raw),
        stated,
        len(name),
        0,
        0,
        0,
        0,
        0,
        0,
    )
    end_offset = len(local) + len(name) + len(raw)
    eocd = struct.pack("<4sHHHHIIH", b"PK\5\6", 0, 0, 1, 1, len(central) + len(name), end_offset, 0)
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    path.write_bytes(local + name + raw + central + name + eocd)
    return path


@pytest.mark.parametrize("stated", [100, 2 << 20], ids=["small-stated", "mid-stated"])
def test_a_member_that_inflates_past_its_stated_size_is_a_size_mismatch_in_bounded_memory(
    tmp_path: Path, stated: int
) -> None:
    import resource

    from wheels.audit import audit_wheel
    from wheels.policy import load_vendor_policy

    wheel = _bomb(tmp_path, 256 << 20, stated)  # 256 MB of zeros in about 250 KB
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    audit = audit_wheel(wheel, load_vendor_policy("cpu"), workers=1)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    found = [f for f in audit.findings if f.member == "demo/zeros.bin"]
    assert [f.code for f in found] == ["size-mismatch"], found
    assert f"the {stated} bytes" in found[0].message
    assert grown < 64 << 10, f"peak RSS grew by {grown} KiB"  # never the 256 MB
