"""The real NVIDIA wheels: cuBLAS and NCCL are missing from a clean target Python, then found once
nvidia-cublas and nvidia-nccl-cu13 are pip-installed into it (from PyPI, about 750 MB; or from
$INFINI_STACK_TEST_WHEELHOUSE without the network)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import preflight
from builder.core import host as host_facts
from builder.manifest.loader import load_stack

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ("nvidia-cublas", "nvidia-nccl-cu13")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path("/usr/local/cuda/bin/nvcc").is_file(),
        reason="needs the CUDA toolkit at /usr/local/cuda",
    ),
]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("wheels") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    yield python, Path(site.stdout.strip())
    shutil.rmtree(root, ignore_errors=True)  # about 1 GB installed


def install(site: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        str(site),
        *WHEELS,
    ]
    if house := os.environ.get("INFINI_STACK_TEST_WHEELHOUSE"):
        argv[4:4] = ["--no-index", "--find-links", house]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot pip install {' '.join(WHEELS)}: {done.stderr.strip()[-300:]}")


def test_real_wheels_cublas_and_nccl_missing_then_found_once_pip_installed(
    venv: tuple[str, Path],
) -> None:
    python, site = venv
    stack = load_stack(ROOT / "stack.yaml")
    host = host_facts.detect(dict(os.environ), python=python)
    before = preflight.check(stack, "nvidia", host)
    assert {"cublas", "cublaslt", "nccl"} <= {r.name for r in before.failures}

    install(site)
    after = preflight.check(stack, "nvidia", host)
    cublas, nccl = after.get("cublas"), after.get("nccl")
    assert cublas is not None and cublas.status == "found"
    assert cublas.version is not None and cublas.version.startswith("13.")
    assert cublas.version_source == (
        "cublas_api.h CUBLAS_VER_MAJOR/CUBLAS_VER_MINOR/CUBLAS_VER_PATCH"
    )
    assert cublas.path == str(site / "nvidia" / "cu13" / "lib" / "libcublas.so.13")
    assert nccl is not None and nccl.status == "found" and nccl.wanted == ">=2.18"
    assert nccl.path == str(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    assert any("no unversioned link name libnccl.so" in d for d in nccl.details)
    hints = after.hints()
    assert hints["NCCL_LIB"] == nccl.path
    assert hints["NCCL_INC"] == str(site / "nvidia" / "nccl" / "include")
    assert hints["CUDA_cublas_LIBRARY"] == cublas.path
    assert not {"cublas", "cublaslt", "nccl"} & {r.name for r in after.failures}


PROJECT = """
cmake_minimum_required(VERSION 3.18)
project(probe LANGUAGES CXX)
find_package(CUDAToolkit REQUIRED)
# As InfiniCCL 1f3e24a looks for NCCL on NVIDIA: no hints at all.
find_library(NCCL_LIB NAMES nccl REQUIRED)
find_path(NCCL_INC NAMES nccl.h REQUIRED)
add_library(probe SHARED probe.cpp)
target_include_directories(probe PRIVATE ${NCCL_INC})
target_link_libraries(probe PRIVATE CUDA::cublas ${NCCL_LIB})
"""
SOURCE = """
#include <cublas_v2.h>
#include <nccl.h>
int probe() { cublasHandle_t h; ncclUniqueId id; ncclGetUniqueId(&id); return cublasCreate(&h); }
"""


def test_real_wheels_hints_make_cmake_link_the_wheel_libraries(
    venv: tuple[str, Path], tmp_path: Path
) -> None:
    """The defines preflight hands the vendors are enough for CMake's own lookups."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    python, site = venv
    if not (site / "nvidia" / "nccl").is_dir():
        install(site)
    stack = load_stack(ROOT / "stack.yaml")
    report = preflight.check(stack, "nvidia", host_facts.detect(dict(os.environ), python=python))
    (tmp_path / "CMakeLists.txt").write_text(PROJECT, encoding="utf-8")
    (tmp_path / "probe.cpp").write_text(SOURCE, encoding="utf-8")
    build = tmp_path / "build"
    defines = [f"-D{k}={v}" for k, v in report.hints().items()]
    for argv in (
        ["cmake", "-S", str(tmp_path), "-B", str(build), "-G", "Ninja", *defines],
        ["cmake", "--build", str(build)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with (build / "libprobe.so").open("rb") as f:
        dynamic = next(s for s in ELFFile(f).iter_sections() if isinstance(s, DynamicSection))
        needed = {
            t.needed
            for t in dynamic.iter_tags()  # type: ignore[attr-defined]
            if t.entry.d_tag == "DT_NEEDED"
        }
    assert {"libcublas.so.13", "libnccl.so.2"} <= needed
