"""A big member kept only where the audit reads it (wheels.audit.sparse): a library built here,
with its kernels and data in one executable segment as CUDA's own libraries have them, scans as
it does kept whole, without a second inflate; a read outside what was kept still gets the
right bytes."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.integration.test_audit_cuda import c_array
from tests.unit.test_fatbin import ELF, LINUX64, PTX, PTX_TEXT, entry, fatbin
from tests.wheelmaker import Compiler, have_gcc, make_wheel
from wheels.audit import members, raw, sparse
from wheels.audit.directory import read_directory
from wheels.audit.raw import open_raw, task_for
from wheels.elf import Chunks, section_span
from wheels.elf.reader import HEAD, PT_DYNAMIC, PT_LOAD, Reader, read_header, read_segments

pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc is not installed")

PAD = 3 << 20  # read-only data the audit never reads, between the code and the fat binary
SOURCE = f"""
const unsigned char pad[{PAD}] = {{1, 2, 3}};
int answer(int x) {{ return x + pad[x & 3]; }}
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sparse")
    code = fatbin(entry(ELF, 90), entry(PTX, 90, LINUX64, PTX_TEXT, (8, 7)))
    lib = Compiler(root / "build").shared(
        "libkernels.so",
        SOURCE + c_array("fb", code, ".nv_fatbin"),
        soname="libkernels.so",
        flags=["-Wl,-z,noseparate-code"],  # one segment for code and read-only data
    )
    data = lib.read_bytes()
    span = section_span(data, ".nv_fatbin")
    r = Reader(data)
    (text,) = [s for s in read_segments(r, read_header(r)) if s.p_type == PT_LOAD and s.flags & 1]
    assert span is not None and text.offset <= span[0] < text.offset + text.filesz
    files = {"demo/__init__.py": b"", "demo/lib/libkernels.so": data}
    return make_wheel(root / "w", files, version="1.0+cu130")


def scans(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[members.MemberScan], members.MemberScan, list[sparse.Sparse]]:
    """The library's member scanned kept only where read (with a free core, then without),
    then kept whole; and what the first two kept."""
    made: list[sparse.Sparse] = []
    source = sparse.Keeper.source

    def spy(self: sparse.Keeper, *args: object) -> sparse.Sparse:
        made.append(source(self, *args))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(sparse.Keeper, "source", spy)
    # This library is small: what holds for a big one is asked of it at this scale (mapped
    # from the wheel, as a big member is).
    monkeypatch.setattr(members, "SPARSE_ABOVE", 0)
    monkeypatch.setattr(raw, "STREAM_READ_ABOVE", 0)
    for name, size in (("PREFIX", 16 << 10), ("SMALL_SEGMENT", 64 << 10)):
        monkeypatch.setattr(sparse, name, size)
    index, info = next(
        (i, x) for i, x in enumerate(read_directory(path)) if x.filename.endswith(".so")
    )
    task = task_for(index, info, "sha256")
    kept = [members.scan_member(task, open_raw(path, task), path, spare) for spare in (True, False)]
    monkeypatch.setattr(members, "SPARSE_ABOVE", 1 << 40)
    whole = members.scan_member(task, open_raw(path, task), path, spare_core=False)
    return kept, whole, list(made)


def test_a_library_kept_only_where_it_is_read_scans_as_kept_whole_without_inflating_again(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, whole, made = scans(wheel, monkeypatch)
    assert len(made) == 2 and [s.misses for s in made] == [0, 0]  # every read, its fat
    # binary's too, in what was kept; and the padding was not kept
    assert all(sum(len(d) for _, d in s.spans) < s.size // 4 for s in made)
    assert kept == [whole, whole]
    assert whole.device is not None and whole.elf is not None
    assert [(e.kind, e.arch) for e in whole.device.entries] == [("sass", 90), ("ptx", 90)]


def test_a_read_outside_what_was_kept_inflates_the_file_again_once() -> None:
    data = bytes(range(256)) * 64
    again: list[int] = []

    def whole() -> Chunks:
        again.append(1)
        return Chunks([data])

    source = sparse.Sparse(len(data), [(0, bytearray(data[:100]))], whole, None)
    assert bytes(source.range(10, 20)) == data[10:30] and again == []
    assert bytes(source.range(90, 20)) == data[90:110] and again == [1]  # past the kept bytes
    assert bytes(source.range(5000, 300)) == data[5000:5300] and again == [1]
    assert source.misses == 1 and source.head(4) == data[:4]


def test_what_is_kept_is_decided_from_the_program_headers(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read("demo/lib/libkernels.so")
    for name, size in (("PREFIX", 16 << 10), ("SMALL_SEGMENT", 64 << 10), ("AFTER_SEGMENT", 0)):
        monkeypatch.setattr(sparse, name, size)
    spans = sparse.wanted(data[:HEAD], len(data), final=True)
    assert spans is not None
    r = Reader(data)
    header = read_header(r)
    (dynamic,) = [s for s in read_segments(r, header) if s.p_type == PT_DYNAMIC]

    def kept(lo: int, hi: int) -> int:
        return sum(max(0, min(hi, b) - max(lo, a)) for a, b in spans)

    assert kept(0, 16 << 10) == 16 << 10  # the first bytes
    assert kept(dynamic.offset, dynamic.offset + dynamic.filesz) == dynamic.filesz
    assert kept(header.shoff, len(data)) == len(data) - header.shoff  # the section headers
    rodata = section_span(data, ".rodata")
    assert rodata is not None and rodata[1] >= PAD
    assert kept(rodata[0], rodata[0] + rodata[1]) < PAD // 10  # the padding, dropped
    assert sparse.wanted(b"not an ELF file at all", 1 << 30, final=True) == [(0, HEAD)]
    assert sparse.wanted(b"\x7fEL", 1 << 30, final=False) is None  # too few bytes to tell
