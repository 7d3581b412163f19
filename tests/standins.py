"""Stand-in vendor trees for tests: what cannot exist on this host (MUSA, the PPU SDK, NVIDIA
wheels, a linked provider's distribution), built in a temporary directory with the real layout.

- compiler wrappers are shell scripts printing their version in the real tool's format
  (``mcc --version``, ``nvcc --version``/``--list-gpu-arch``, ``ppu-llc --version``);
- libraries are real ELF shared objects compiled with gcc, carrying the real SONAME
  (``libmusart.so.4``) behind the usual link chain (``libmusart.so -> .so.4 -> .so.4.3.0``);
- headers carry the version macros the probes read (``NCCL_MAJOR``, ``CUBLAS_VER_MAJOR``...);
- wheels are ``*.dist-info`` directories (METADATA, RECORD) beside the files they install.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from builder.providers.probe import (
    ComponentNeeds,
    Places,
    ProbeContext,
    Purpose,
    PythonFacts,
    Selection,
)
from builder.providers.search import index_distributions
from builder.vendors import get as get_vendor

HAVE_GCC = shutil.which("gcc") is not None and shutil.which("g++") is not None


# -- files -----------------------------------------------------------------------------------------


def script(path: Path, body: str) -> Path:
    """An executable shell script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body.lstrip("\n"), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def header(path: Path, macros: Mapping[str, object], text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"#define {name} {value}" for name, value in macros.items()]
    path.write_text("#pragma once\n" + "\n".join(lines) + "\n" + text, encoding="utf-8")
    return path


def shared_library(
    directory: Path,
    stem: str,
    version: str,
    *,
    soname_major: str | None = None,
    link: bool = True,
    source: str = "int stub_symbol(void) { return 0; }\n",
    cxx: bool = False,
) -> Path:
    """``lib<stem>.so.<version>`` compiled with gcc, SONAME ``lib<stem>.so.<major>``, with the
    ``.so.<major>`` link and (unless ``link=False``) the unversioned link name."""
    directory.mkdir(parents=True, exist_ok=True)
    major = soname_major or version.split(".", maxsplit=1)[0]
    real = directory / f"lib{stem}.so.{version}" if version else directory / f"lib{stem}.so"
    soname = f"lib{stem}.so.{major}" if major else real.name
    compile_library(real, source, soname=soname, cxx=cxx)
    if real.name != soname:
        _symlink(directory / soname, real.name)
    if link and version:
        _symlink(directory / f"lib{stem}.so", soname)
    return real


def compile_library(
    output: Path, source: str, *, soname: str | None = None, cxx: bool = False
) -> Path:
    suffix = ".cpp" if cxx else ".c"
    src = output.parent / f".{output.name}{suffix}"
    src.write_text(source, encoding="utf-8")
    argv = ["g++" if cxx else "gcc", "-shared", "-fPIC", "-O0", "-o", str(output), str(src)]
    if cxx:
        argv.insert(1, "-std=c++17")
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    subprocess.run(argv, check=True, capture_output=True)
    src.unlink()
    return output


def _symlink(path: Path, target: str) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def dist_info(site: Path, name: str, version: str, files: Iterable[str] = ()) -> Path:
    """``<name>-<version>.dist-info`` with METADATA and a RECORD listing ``files``."""
    directory = site / f"{name.replace('-', '_')}-{version}.dist-info"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA stand-in.\n",
        encoding="utf-8",
    )
    record = [f"{f},," for f in files] + [
        f"{directory.name}/METADATA,,",
        f"{directory.name}/RECORD,,",
    ]
    (directory / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return directory


# -- vendor trees ----------------------------------------------------------------------------------


def mcc_script(root: Path, version: str) -> Path:
    """``bin/mcc`` printing clang's line, then ``mcc version X`` (as MUSA toolkits do)."""
    return script(
        root / "bin" / "mcc",
        f"""
if [ "$1" = "--version" ]; then
  echo "clang version 14.0.0"
  echo "mcc version {version}"
  echo "Target: x86_64-unknown-linux-gnu"
  echo "Thread model: posix"
  echo "InstalledDir: {root}/bin"
  exit 0
fi
exit 1
""",
    )


def musa_tree(
    root: Path,
    version: str = "4.3.0",
    *,
    libraries: Sequence[str] = ("musa", "musart", "mublas"),
    mccl: str | None = "2.18.3",
) -> Path:
    """A MUSA toolkit: bin/mcc, lib/lib<x>.so* with SONAMEs, include/ headers."""
    mcc_script(root, version)
    for stem in libraries:
        shared_library(root / "lib", stem, version)
    header(root / "include" / "musa_runtime.h", {"MUSA_STANDIN": 1})
    header(root / "include" / "mublas.h", {"MUBLAS_STANDIN": 1})
    if mccl is not None:
        major, minor, patch = mccl.split(".")
        shared_library(root / "lib", "mccl", mccl)
        header(
            root / "include" / "mccl.h",
            {"MCCL_MAJOR": major, "MCCL_MINOR": minor, "MCCL_PATCH": patch},
        )
    return root


def nvcc_script(root: Path, release: str, archs: Sequence[int] = (75, 80, 86, 89, 90)) -> Path:
    """``bin/nvcc`` answering ``--version`` and ``--list-gpu-arch`` as NVIDIA's does."""
    listed = "\\n".join(f"compute_{a}" for a in archs)
    return script(
        root / "bin" / "nvcc",
        f"""
case "$1" in
  --version)
    echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Cuda compilation tools, release {release}, V{release}.1"
    exit 0;;
  --list-gpu-arch)
    printf "{listed}\\n"; exit 0;;
esac
exit 1
""",
    )


def ppu_sdk_tree(sdk: Path, version: str | None = "2.1.0", cuda_release: str = "12.3") -> Path:
    """A PPU SDK: <sdk>/bin/ppu-llc (its version) and <sdk>/CUDA_SDK with a CUDA-like nvcc."""
    if version is not None:
        script(
            sdk / "bin" / "ppu-llc",
            f"""
echo "PPU LLVM (https://www.t-head.cn)"
echo "  ppu version: {version}"
echo "  LLVM version 17.0.6"
""",
        )
    nvcc_script(sdk / "CUDA_SDK", cuda_release, archs=(80,))
    header(sdk / "CUDA_SDK" / "include" / "cuda_runtime_api.h", {"CUDART_VERSION": 12030})
    return sdk / "CUDA_SDK"


def nccl_wheel(site: Path, version: str = "2.21.5", dist: str = "nvidia-nccl-cu13") -> Path:
    """The nvidia-nccl-cu13 layout: nvidia/nccl/{include/nccl.h, lib/libnccl.so.2} only."""
    major, minor, patch = version.split(".")
    prefix = site / "nvidia" / "nccl"
    header(
        prefix / "include" / "nccl.h",
        {"NCCL_MAJOR": major, "NCCL_MINOR": minor, "NCCL_PATCH": patch, "NCCL_SUFFIX": '""'},
    )
    shared_library(prefix / "lib", "nccl", major, link=False)
    dist_info(site, dist, version, ["nvidia/nccl/include/nccl.h", "nvidia/nccl/lib/libnccl.so.2"])
    return prefix


def cublas_wheel(site: Path, version: str = "13.1.0.3") -> Path:
    """The nvidia-cublas (CUDA 13) layout: nvidia/cu13/{include,lib/libcublas{,Lt}.so.13}."""
    major, minor, patch = version.split(".")[:3]
    prefix = site / "nvidia" / "cu13"
    header(
        prefix / "include" / "cublas_api.h",
        {"CUBLAS_VER_MAJOR": major, "CUBLAS_VER_MINOR": minor, "CUBLAS_VER_PATCH": patch},
    )
    header(prefix / "include" / "cublas_v2.h", {})
    header(prefix / "include" / "cublasLt.h", {})
    shared_library(prefix / "lib", "cublas", major, link=False)
    shared_library(prefix / "lib", "cublasLt", major, link=False)
    dist_info(site, "nvidia-cublas", version, ["nvidia/cu13/lib/libcublas.so.13"])
    return prefix


# -- probe contexts --------------------------------------------------------------------------------


def vendor_of(options: Mapping[str, Mapping[str, str]]) -> str:
    """The vendor per-component options build for (WITH_THEAD before WITH_NVIDIA: the PPU SDK
    is CUDA-compatible, and InfiniOps takes WITH_NVIDIA for it)."""
    switches = {k for opts in options.values() for k, v in opts.items() if v == "ON"}
    for switch, vendor in (
        ("WITH_THEAD", "thead"),
        ("WITH_MOORE", "moore"),
        ("WITH_NVIDIA", "nvidia"),
    ):
        if switch in switches:
            return vendor
    return "cpu"


def context(
    *,
    env: Mapping[str, str] | None = None,
    site: Sequence[Path] = (),
    options: Mapping[str, Mapping[str, str]] | None = None,
    purpose: Purpose = "build",
    constraints: Mapping[str, str] | None = None,
    cuda_architectures: Sequence[str] = (),
    places: Places | None = None,
) -> ProbeContext:
    """A ProbeContext over a controlled environment and import path (nothing of this host's
    site-packages unless given); the toolkit places are those of the vendor the options build
    for, unless given."""
    components = {name: ComponentNeeds(options=opts) for name, opts in (options or {}).items()}
    return ProbeContext(
        places=places if places is not None else get_vendor(vendor_of(options or {})).places,
        env=dict(env or {"PATH": "/usr/bin:/bin"}),
        python=PythonFacts(
            executable=sys.executable,
            version="3.11.7",
            include=None,
            site_dirs=tuple(site),
            scripts=None,
            dists=index_distributions(site),
        ),
        cxx="",
        selection=Selection(components=components),
        purpose=purpose,
        constraints=dict(constraints or {}),
        cuda_architectures=tuple(cuda_architectures),
    )
