"""RUNPATHs the wheel assembler writes for libraries other distributions supply (gcc, patchelf)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.wheelmaker import FLASH_ATTN as FA
from tests.wheelmaker import Compiler, have_gcc, uses_site_root_library
from wheels.assemble import fix_loading, read_dynamic
from wheels.policy import DistLib

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]


def test_supplied_libraries_get_origin_relative_entries_and_requires(tmp_path: Path) -> None:
    cc = Compiler(tmp_path / "build")
    cudart = cc.shared(
        "libcudart.so.13", "int cudaFree(void *p) { return p != 0; }\n", soname="libcudart.so.13"
    )
    # The build's absolute RUNPATH is dropped; what the wheel needs is written instead.
    ops = uses_site_root_library(cc, runpath=str(tmp_path), links=[cudart])
    root = tmp_path / "wheel"
    (root / "pkg" / "lib").mkdir(parents=True)
    shutil.copy(ops, root / "pkg" / "lib" / "libops.so")
    supplied = {
        "libcudart.so.13": DistLib(distribution="nvidia-cuda-runtime", dir="nvidia/cu13/lib"),
        FA: DistLib(distribution="flash-attn", dir=""),  # the top of site-packages
    }
    requires = fix_loading(root, supplied)
    info = read_dynamic(root / "pkg" / "lib" / "libops.so")
    assert info is not None
    assert info.runpath == ("$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN/../..")
    assert requires == ["nvidia-cuda-runtime", "flash-attn"]
