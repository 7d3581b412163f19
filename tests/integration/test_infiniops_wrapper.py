"""components/infiniops/: the wrapper project configured for real (cmake) around a stand-in
InfiniOps tree that reports what it was given."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

WRAPPER = ROOT / "components" / "infiniops"
STANDIN = """cmake_minimum_required(VERSION 3.18)
project(InfiniOpsStandin NONE)
message(STATUS "standin INFINI_OPS_OPS=${INFINI_OPS_OPS}")
"""


def configure(tmp_path: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "infiniops"
    source.mkdir(exist_ok=True)
    (source / "CMakeLists.txt").write_text(STANDIN)
    argv = [
        "cmake",
        "-S",
        str(WRAPPER),
        "-B",
        str(tmp_path / "build"),
        "-G",
        "Ninja",
        f"-DINFINIOPS_SOURCE_DIR={source}",
        *defines,
    ]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_selection_file_is_resolved_next_to_the_wrapper_for_infiniops(tmp_path: Path) -> None:
    result = configure(tmp_path, "-DINFINI_OPS_SELECTION=ops/nvidia.json")
    assert result.returncode == 0, result.stderr
    assert f"standin INFINI_OPS_OPS={WRAPPER / 'ops' / 'nvidia.json'}" in result.stdout


def test_an_operator_list_reaches_infiniops_unchanged_without_a_selection(tmp_path: Path) -> None:
    result = configure(tmp_path, "-DINFINI_OPS_OPS=add,gemm")
    assert result.returncode == 0, result.stderr
    assert "standin INFINI_OPS_OPS=add,gemm" in result.stdout


def test_a_missing_selection_file_stops_the_configure_naming_it(tmp_path: Path) -> None:
    result = configure(tmp_path, "-DINFINI_OPS_SELECTION=ops/nope.json")
    assert result.returncode != 0
    message = " ".join(result.stderr.split())  # CMake wraps its message at a width of its own
    assert "INFINI_OPS_SELECTION='ops/nope.json'" in message
    assert "does not exist" in message
