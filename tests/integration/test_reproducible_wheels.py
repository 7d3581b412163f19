"""Reproducible wheels: the same inputs give the same bytes, `wheel --verify` proves it with a
second build from fresh directories, and catches a build that is not."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from builder.pipeline.reproduce import elf_difference
from tests.conftest import HAVE_NVCC
from tests.gitrepos import init_repo
from wheels.elf.reader import section_bytes

pytestmark = pytest.mark.integration

DEFAULT_TIME = (1980, 1, 1, 0, 0, 0)

NON_DETERMINISTIC = """
# A deliberately non-reproducible input: the configure time and a random value in a Python file.
string(TIMESTAMP MINICORE_BUILT "%Y-%m-%dT%H:%M:%S" UTC)
string(RANDOM LENGTH 16 MINICORE_NONCE)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/_stamp.py
     "BUILT = '${MINICORE_BUILT}'\\nNONCE = '${MINICORE_NONCE}'\\n")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/_stamp.py DESTINATION python/minicore)
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheel_in(directory: Path) -> Path:
    (wheel,) = directory.glob("*.whl")
    return wheel


@pytest.fixture(autouse=True)
def no_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)


def test_two_wheel_runs_from_the_same_inputs_are_byte_identical(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    first = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "a")
    assert first.code == 0, first.err
    second = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "b")
    assert second.code == 0, second.err
    assert sha256(wheel_in(tmp_path / "a")) == sha256(wheel_in(tmp_path / "b"))


def test_members_are_ordered_with_fixed_times_and_normalised_modes(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path).code == 0
    with zipfile.ZipFile(wheel_in(tmp_path)) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    payload = [n for n in names if ".dist-info/" not in n]
    assert payload == sorted(payload)
    assert names[-1].endswith(".dist-info/RECORD")
    assert any(n.endswith(".dist-info/sboms/infini-stack.cdx.json") for n in names)
    # A path source outside git has no time of its own: 1980-01-01.
    assert {i.date_time for i in infos} == {DEFAULT_TIME}
    assert {i.external_attr >> 16 for i in infos} <= {0o100644, 0o100755}
    assert {i.compress_type for i in infos} == {zipfile.ZIP_DEFLATED}


def test_source_date_epoch_sets_every_member_time(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path).code == 0
    with zipfile.ZipFile(wheel_in(tmp_path)) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_a_path_source_in_a_git_checkout_takes_its_last_commit_time(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2024-03-01T12:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-03-01T12:00:00Z")
    init_repo(mini.parent, {})  # the mini stack's copy, as it is, committed
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d").code == 0
    with zipfile.ZipFile(wheel_in(tmp_path / "d")) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2024, 3, 1, 12, 0, 0)}


def test_nothing_we_write_names_a_build_path(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d").code == 0
    with zipfile.ZipFile(wheel_in(tmp_path / "d")) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            for path in (shared_home, mini.parent, tmp_path):
                assert str(path).encode() not in data, (info.filename, path)


def test_verify_builds_again_from_fresh_directories_and_passes_on_the_mini_stack(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    before = {p.name for p in shared_home.parent.iterdir()} | {"d"}
    result = cli(
        "wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d", "--verify"
    )
    assert result.code == 0, result.err
    assert "two builds are byte-identical" in result.err
    assert "cpu: 4 built, 0 from the store" in result.err  # the second build reused nothing
    assert wheel_in(tmp_path / "d").is_file()
    assert {p.name for p in shared_home.parent.iterdir()} == before  # the fresh home is gone


def test_verify_names_the_member_that_a_timestamp_in_the_build_makes_differ(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cmake = mini.parent / "engine" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + NON_DETERMINISTIC)
    time.sleep(1)  # a different second for the second configure, even on a fast machine
    result = cli(
        "wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d", "--verify"
    )
    assert result.code == 6, result.err
    assert "is not reproducible" in result.err
    assert "minicore/_stamp.py: contents differ" in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host")
def test_two_nvcc_builds_of_a_cuda_library_are_byte_identical(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """nvcc names its intermediate files after its process id, and the host compiler writes
    that name into the object's symbol table: without --objdir-as-tempdir the two builds of
    minirt's nvidia.cu differ in .symtab."""
    result = cli(
        "wheel", "--manifest", mini, "--vendor", "nvidia", "--out", tmp_path / "d", "--verify"
    )
    assert result.code == 0, result.err
    assert "two builds are byte-identical" in result.err
    with zipfile.ZipFile(wheel_in(tmp_path / "d")) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith("/libminirt.so")]
        library = zf.read(name)
    assert section_bytes(library, ".nv_fatbin"), "minirt carries no device code: nvcc was not used"
    assert b"tmpxft_" not in library


def test_verify_names_the_elf_sections_and_symbols_that_differ(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler is not None
    libraries = []
    for suffix in ("one", "two"):
        source = tmp_path / f"lib_{suffix}.c"
        source.write_text(
            f"static int helper_{suffix}(void) {{ return 1; }}\n"
            f"int api(void) {{ return helper_{suffix}(); }}\n"
        )
        out = tmp_path / f"lib_{suffix}.so"
        subprocess.run(
            [compiler, "-O0", "-shared", "-fPIC", str(source), "-o", str(out)], check=True
        )
        libraries.append(out.read_bytes())
    note = elf_difference(*libraries)
    assert note is not None
    assert note.startswith("ELF sections differ: ") and ".strtab" in note.split(";")[0]
    assert ".symtab symbols only in the first: helper_one, lib_one.c" in note
    assert ".symtab symbols only in the second: helper_two, lib_two.c" in note
    assert elf_difference(b"not an ELF file", b"not one either") is None


def test_a_cold_verify_builds_the_second_time_beside_the_first_and_still_catches_a_difference(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cmake = mini.parent / "engine" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + NON_DETERMINISTIC)
    before = {p.name for p in home.parent.iterdir()}
    result = cli(
        "wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d", "--verify"
    )
    assert "beside the first build" in result.err
    assert result.code == 6, result.err
    assert "minicore/_stamp.py: contents differ" in result.err
    assert {p.name for p in home.parent.iterdir()} <= before | {"d", "home"}  # no fresh home left


ANONYMOUS_KERNEL = """\
namespace {
__device__ int counter;
__global__ void bump(int* out) { out[0] = ++counter; }
}  // namespace
extern "C" void launch(int* out) { bump<<<1, 1>>>(out); }
"""
# A translation unit with no external definition of its own, only an explicit instantiation (as
# InfiniOps' generated operator_call_instantiations_*.cc): cudafe++ has no name to anchor its
# anonymous namespaces to (libcu++'s cuda::std::ignore) and draws one from its process id.
UNANCHORED_INSTANTIATION = """\
#include <cuda/std/tuple>
template <class T> int first(T t) {
  int a;
  cuda::std::tie(a, cuda::std::ignore) = cuda::std::make_tuple(1, t);
  return a;
}
template int first<int>(int);
"""
CUDA_PROJECT = """\
cmake_minimum_required(VERSION 3.18)
project(anon LANGUAGES CXX CUDA)
add_library(anon SHARED anon.cu inst.cu)
install(TARGETS anon LIBRARY DESTINATION lib)
"""


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host")
def test_nvcc_builds_of_one_pin_in_two_homes_are_byte_identical(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """A git pin is checked out into each home's own source tree, and cudafe++ names anonymous
    namespaces after the source's absolute path: without the source named as the prefix maps
    name it, the two libraries' symbol tables and device code differ. A translation unit with no
    name of its own to anchor them to gets a name drawn from cudafe++'s process id unless the
    launcher gives it a seed."""
    repo = tmp_path / "anon"
    sha = init_repo(
        repo,
        {
            "CMakeLists.txt": CUDA_PROJECT,
            "anon.cu": ANONYMOUS_KERNEL,
            "inst.cu": UNANCHORED_INSTANTIATION,
        },
    )
    stack = tmp_path / "s" / "stack.yaml"
    (stack.parent / "components").mkdir(parents=True)
    stack.write_text(
        'vendors:\n  nvidia: {cuda_architectures: ["90"]}\n'
        f"components:\n  anon:\n    git: {repo}\n    rev: {sha}\n"
    )
    (stack.parent / "components" / "anon.yaml").write_text(
        "vendors:\n  nvidia: {}\noutputs: [lib/libanon.so]\n"
    )
    libraries = []
    for home in ("homeA", "homeB"):  # two homes, paths of one length
        result = cli(
            "build", "--manifest", stack, "--vendor", "nvidia", "--home", tmp_path / home,
            "--launcher", "none", "--no-memo",
        )  # fmt: skip
        assert result.code == 0, result.err
        (library,) = (tmp_path / home / "store").glob("*/prefix/lib/libanon.so")
        libraries.append(library.read_bytes())
    assert b"_GLOBAL__N__" in libraries[0]  # an anonymous namespace's name is in there
    assert b"_7_inst_cu_" in libraries[0]  # and the unanchored one's
    assert section_bytes(libraries[0], ".nv_fatbin")
    assert libraries[0] == libraries[1], elf_difference(*libraries)
