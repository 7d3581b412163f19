"""NVIDIA providers: the CUDA toolkit (nvcc), cudart, cuBLAS/cuBLASLt, NCCL, CUTLASS, PyTorch, the
requested CUDA architectures, a libcuda.so to link, and at run time the driver (libcuda.so.1) and
nvidia-smi."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from builder.providers import search
from builder.providers.cxxruntime import CUDA_HOST_RUNTIME
from builder.providers.libs import (
    LibrarySpec,
    dist_candidates,
    encoded_reader,
    library_reader,
    macro_reader,
    read_dist,
    standard_candidates,
    toolkit_root,
)
from builder.providers.nccl import NCCL
from builder.providers.probe import (
    BOTH,
    BUILD,
    RUN,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    unusable,
)

# Upstream's order (CMake's CUDAToolkit hints): CUDA_HOME, CUDA_PATH, /usr/local/cuda, nvcc on PATH.
_RELEASE = re.compile(r"release (\d+\.\d+)")
CUDA_OPTIONS = ("WITH_NVIDIA", "INFINILM_WITH_CUDA")


# -- the toolkit: nvcc -----------------------------------------------------------------------------


def toolkit_candidates(ctx: ProbeContext, *, path: bool = True) -> Iterator[Candidate]:
    """The vendor's toolkit places (its plugin's), then an nvcc on PATH."""
    yield from search.place_dirs(ctx, ctx.places)
    if path:
        for nvcc in search.on_path(ctx, ("nvcc",)):
            yield Candidate(path=_root_of(nvcc.path), origin="PATH", extra={"nvcc": nvcc.path})


def _root_of(nvcc: Path) -> Path:
    """The toolkit an nvcc on PATH belongs to, seeing through a wrapper script that execs it."""
    real = nvcc.resolve()
    try:
        head = real.read_bytes()[:4096] if real.stat().st_size < 4096 else b""
    except OSError:
        head = b""
    if head.startswith(b"#!"):
        target = re.search(rb"(/\S+)/bin/nvcc\b", head)
        if target:
            return Path(target.group(1).decode(errors="replace"))
    return real.parent.parent


def read_nvcc_toolkit(ctx: ProbeContext, candidate: Candidate) -> tuple[Path, str | None, str]:
    """(nvcc, release, problem) for a toolkit root; release None when nvcc does not say."""
    nvcc = candidate.path / "bin" / "nvcc"
    if not nvcc.is_file():
        return nvcc, None, "does not exist" if not candidate.path.exists() else "has no bin/nvcc"
    code, out = search.tool_output([str(nvcc), "--version"], ctx)
    release = search.first_match(_RELEASE, out) if code == 0 else None
    return nvcc, release, "" if release else f"`nvcc --version` printed no release: {out[-160:]!r}"


def _read_cuda(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    nvcc, release, problem = read_nvcc_toolkit(ctx, candidate)
    if not nvcc.is_file():
        return unusable(problem)
    defines = {"CUDAToolkit_ROOT": str(candidate.path), "CMAKE_CUDA_COMPILER": str(nvcc)}
    return Reading(
        version=release,
        source="nvcc --version",
        path=nvcc,
        defines=defines,
        notes=_cross_check(candidate.path, release),
        problem=problem or None,
    )


def _cross_check(root: Path, release: str | None) -> tuple[str, ...]:
    """version.json and cuda.h should agree with nvcc; say so when they cannot be read."""
    notes: list[str] = []
    version_json = root / "version.json"
    if version_json.is_file():
        try:
            data = json.loads(version_json.read_text(encoding="utf-8"))
            declared = str(data["cuda"]["version"])
        except (ValueError, KeyError, TypeError) as exc:
            notes.append(
                f"version.json is unreadable ({type(exc).__name__}: {exc}); nvcc --version is used"
            )
        else:
            if release and not declared.startswith(release + "."):
                notes.append(f"version.json says {declared} but nvcc says {release}")
    else:
        notes.append(
            "no version.json (a toolkit assembled from pip wheels has none): "
            "nvcc --version is the version"
        )
    header = root / "include" / "cuda.h"
    if header.is_file() and release:
        from_header = search.encoded_version(search.header_macros(header).get("CUDA_VERSION"))
        if from_header and from_header != release:
            notes.append(f"cuda.h CUDA_VERSION says {from_header} but nvcc says {release}")
    return tuple(notes)


CUDA = Provider(
    name="cuda",
    what="CUDA toolkit (nvcc)",
    needed_for=BUILD,
    rules=(Rule(options=CUDA_OPTIONS),),
    candidates=lambda ctx, deps: toolkit_candidates(ctx),
    read=_read_cuda,
    hint="install the CUDA toolkit (NVIDIA's apt repository: cuda-toolkit-13-0) at "
    "/usr/local/cuda, or set CUDA_HOME to it",
)


# -- requested architectures -----------------------------------------------------------------------

_ARCH = re.compile(r"(?:sm_|compute_)?(\d{2,3})([af]?)(?:-real|-virtual)?")


def _arch_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    for name in ("cuda", "ppu-sdk"):
        result = deps.get(name)
        if result is not None and result.ok and result.path:
            yield Candidate(path=Path(result.path), origin=f"{name}'s nvcc")


def unsupported_architectures(requested: Sequence[str], listed: set[str]) -> list[str]:
    out = []
    for arch in requested:
        match = _ARCH.fullmatch(arch)
        if match and f"compute_{match.group(1)}" not in listed:
            out.append(arch)
    return out


def _read_arch(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    requested = ctx.cuda_architectures
    if not requested:
        return Reading(
            version="default",
            satisfied=True,
            source="stack.yaml",
            notes=("no cuda_architectures in stack.yaml: nvcc's default applies",),
        )
    symbolic = [a for a in requested if not _ARCH.fullmatch(a)]
    code, out = search.tool_output([str(candidate.path), "--list-gpu-arch"], ctx)
    listed = set(re.findall(r"compute_\d+", out)) if code == 0 else set()
    if not listed:
        return Reading(
            version=";".join(requested),
            source="nvcc --list-gpu-arch",
            notes=("this nvcc cannot list its architectures; not checked",),
        )
    missing = unsupported_architectures(requested, listed)
    numbers = sorted(int(a.split("_")[1]) for a in listed)
    supports = f"compute_{numbers[0]} to compute_{numbers[-1]}"
    notes = tuple(f"'{a}' is decided by nvcc at build time" for a in symbolic)
    return Reading(
        version=";".join(requested),
        source="nvcc --list-gpu-arch",
        satisfied=not missing,
        notes=notes,
        problem=(
            f"this nvcc cannot compile for {', '.join(missing)} (it supports {supports})"
            if missing
            else None
        ),
    )


CUDA_ARCH = Provider(
    name="cuda-arch",
    what="the requested CUDA architectures, as nvcc lists them",
    needed_for=BUILD,
    rules=(Rule(options=CUDA_OPTIONS),),
    requires=("cuda",),
    candidates=_arch_candidates,
    read=_read_arch,
    wanted=lambda ctx: ";".join(ctx.cuda_architectures) or "default",
    hint="change vendors.<vendor>.cuda_architectures in stack.yaml, or use a CUDA toolkit "
    "that supports them",
)


# -- libraries -------------------------------------------------------------------------------------

CUDART_SPEC = LibrarySpec(
    stem="cudart",
    header="cuda_runtime_api.h",
    version=encoded_reader("cuda_runtime_api.h", "CUDART_VERSION"),
    dists=("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"),
    wheel_dirs=("nvidia/cu13", "nvidia/cuda_runtime"),
    link_define="CUDA_cudart_LIBRARY",
)
CUBLAS_SPEC = LibrarySpec(
    stem="cublas",
    header="cublas_v2.h",
    version=macro_reader(
        "cublas_api.h", ("CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH")
    ),
    dists=("nvidia-cublas", "nvidia-cublas-cu12"),
    wheel_dirs=("nvidia/cu13", "nvidia/cublas"),
    link_define="CUDA_cublas_LIBRARY",
)
CUBLASLT_SPEC = LibrarySpec(
    stem="cublasLt",
    header="cublasLt.h",
    version=CUBLAS_SPEC.version,
    dists=CUBLAS_SPEC.dists,
    wheel_dirs=CUBLAS_SPEC.wheel_dirs,
    link_define="CUDA_cublasLt_LIBRARY",
)


def _cuda_library(
    spec: LibrarySpec, *, env_vars: Sequence[str] = ()
) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        root = toolkit_root(deps, "cuda")
        yield from standard_candidates(
            ctx, spec, env_vars=env_vars, toolkit=root, toolkit_origin="cuda toolkit"
        )

    return candidates


def _wheel_hint(pip: str, apt: str) -> str:
    return f"pip install {pip} into the target Python, or apt-get install {apt}"


CUDART = Provider(
    name="cudart",
    what="CUDA runtime (libcudart)",
    needed_for=BOTH,
    rules=(Rule(options=CUDA_OPTIONS),),
    after=("cuda",),
    candidates=_cuda_library(CUDART_SPEC),
    read=library_reader(CUDART_SPEC),
    hint=_wheel_hint("nvidia-cuda-runtime", "cuda-cudart-dev-13-0 (NVIDIA's repository)"),
)
CUBLAS = Provider(
    name="cublas",
    what="cuBLAS (InfiniOps)",
    needed_for=BOTH,
    rules=(Rule(names=frozenset({"infiniops"}), options=("WITH_NVIDIA",)),),
    after=("cuda",),
    candidates=_cuda_library(CUBLAS_SPEC),
    read=library_reader(CUBLAS_SPEC),
    hint=_wheel_hint(
        "nvidia-cublas (CUDA 13; nvidia-cublas-cu12 for CUDA 12)",
        "libcublas-dev-13-0 (NVIDIA's repository)",
    ),
)
CUBLASLT = Provider(
    name="cublaslt",
    what="cuBLASLt (InfiniOps)",
    needed_for=BOTH,
    rules=CUBLAS.rules,
    after=("cuda",),
    candidates=_cuda_library(CUBLASLT_SPEC),
    read=library_reader(CUBLASLT_SPEC),
    hint=CUBLAS.hint,
)


# -- CUTLASS (headers only; InfiniOps on NVIDIA) ---------------------------------------------------


def _cutlass_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    option = ctx.selection.option("FETCHCONTENT_SOURCE_DIR_CUTLASS")
    if option:
        yield Candidate(path=Path(option), origin="stack.yaml option")
    yield from search.env_dirs(
        ctx, ("FETCHCONTENT_SOURCE_DIR_CUTLASS", "CUTLASS_DIR", "CUTLASS_PATH")
    )
    config = ctx.getenv("NvidiaCutlass_DIR")
    if config:  # <prefix>/lib/cmake/NvidiaCutlass
        yield Candidate(path=Path(config).parent.parent.parent, origin="NvidiaCutlass_DIR")
    for prefix in (ctx.getenv("CMAKE_PREFIX_PATH") or "").split(":"):
        if prefix:
            yield Candidate(path=Path(prefix), origin="CMAKE_PREFIX_PATH")
    root = toolkit_root(deps, "cuda")
    if root is not None:
        yield Candidate(path=root, origin="cuda toolkit")
    yield from search.default_dirs(("/usr/local", "/usr"), origin="default prefix")


def _read_cutlass(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    if not candidate.path.exists():
        return unusable("does not exist")
    header = candidate.path / "include" / "cutlass" / "cutlass.h"
    if not header.is_file():
        return unusable("has no include/cutlass/cutlass.h")
    version_h = candidate.path / "include" / "cutlass" / "version.h"
    version = (
        search.macro_version(version_h, ("CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"))
        if version_h.is_file()
        else None
    )
    return Reading(
        version=version,
        source="cutlass/version.h CUTLASS_MAJOR/MINOR/PATCH",
        path=candidate.path,
        defines={"FETCHCONTENT_SOURCE_DIR_CUTLASS": str(candidate.path)},
        problem=None if version else "no CUTLASS_MAJOR/MINOR in cutlass/version.h",
    )


CUTLASS = Provider(
    name="cutlass",
    what="CUTLASS headers (InfiniOps on NVIDIA)",
    needed_for=BUILD,
    # Not when a stack component supplies FETCHCONTENT_SOURCE_DIR_CUTLASS (stack.yaml's cutlass).
    rules=(
        Rule(
            names=frozenset({"infiniops"}),
            options=("WITH_NVIDIA",),
            unless="FETCHCONTENT_SOURCE_DIR_CUTLASS",
        ),
    ),
    after=("cuda",),
    candidates=_cutlass_candidates,
    read=_read_cutlass,
    hint="git clone --depth 1 --branch v4.4.1 https://github.com/NVIDIA/cutlass and set "
    "FETCHCONTENT_SOURCE_DIR_CUTLASS to it (env var or an infiniops option); otherwise "
    "InfiniOps' configure downloads CUTLASS, which needs the network",
)


# -- PyTorch ---------------------------------------------------------------------------------------

TORCH = Provider(
    name="torch",
    what="PyTorch in the target Python (InfiniOps WITH_TORCH / WITH_LINKED)",
    needed_for=BOTH,
    rules=(Rule(names=frozenset({"infiniops"}), options=("WITH_TORCH", "WITH_LINKED")),),
    candidates=dist_candidates(("torch",), "torch"),
    read=read_dist,
    hint=lambda ctx: (
        f"{ctx.python.executable} -m pip install torch (a build for this CUDA, e.g. "
        "--index-url https://download.pytorch.org/whl/cu130)"
    ),
)


# -- build time: a libcuda.so to link (InfiniOps and InfiniCCL link CUDA::cuda_driver) -------------


def _driver_link_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    """Where CMake's FindCUDAToolkit finds ``cuda_driver``: the toolkit's stubs, then the
    system's directories (a driver installed with its development link)."""
    root = toolkit_root(deps, "cuda")
    libdirs = [root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))] if root else []
    for directory in [*(d / "stubs" for d in libdirs), *libdirs]:
        if (directory / "libcuda.so").exists():
            origin = "cuda toolkit stubs" if directory.name == "stubs" else "cuda toolkit"
            yield Candidate(path=directory / "libcuda.so", origin=origin)
    for directory in search.system_lib_dirs(ctx):
        if (directory / "libcuda.so").exists():
            yield Candidate(path=directory / "libcuda.so", origin="system library path")


CUDA_DRIVER_LINK = Provider(
    name="cuda-driver-link",
    what="libcuda.so to link against (the toolkit's stub or the driver's): InfiniOps, InfiniCCL",
    needed_for=BUILD,
    rules=(Rule(names=frozenset({"infiniops", "infiniccl"}), options=("WITH_NVIDIA",)),),
    after=("cuda",),
    candidates=_driver_link_candidates,
    read=lambda ctx, candidate, deps: Reading(source=""),
    hint="install the CUDA toolkit's driver stubs (NVIDIA's cuda-driver-dev-13-0 package puts "
    "lib64/stubs/libcuda.so in the toolkit), or the driver with its libcuda.so link",
)


# -- run time: the driver and nvidia-smi -----------------------------------------------------------


def _driver_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    for directory in [*search.system_lib_dirs(ctx), Path("/usr/lib/wsl/lib")]:
        library = directory / "libcuda.so.1"
        if library.exists():
            yield Candidate(path=library, origin="system library path")


def _read_driver(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    version = search.first_match(
        r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", candidate.path.resolve().name
    )
    return Reading(version=version, source="libcuda.so.1 file name")


CUDA_DRIVER = Provider(
    name="cuda-driver",
    what="NVIDIA driver (libcuda.so.1)",
    needed_for=RUN,
    rules=(Rule(options=CUDA_OPTIONS),),
    candidates=_driver_candidates,
    read=_read_driver,
    hint="install the NVIDIA driver (Debian: apt-get install libcuda1; Ubuntu: "
    "nvidia-driver-580 or libnvidia-compute-580); in a container, run it with the GPU "
    "runtime (--gpus)",
)


def device_tool(name: str, what: str, hint: str, options: tuple[str, ...]) -> Provider:
    """A device-detection command: found on PATH; not run (it may be slow or hang)."""
    return Provider(
        name=name,
        what=what,
        needed_for=RUN,
        rules=(Rule(options=options),),
        candidates=lambda ctx, deps: search.on_path(ctx, (name,)),
        read=lambda ctx, candidate, deps: Reading(source=""),
        hint=hint,
    )


NVIDIA_SMI = device_tool(
    "nvidia-smi",
    "nvidia-smi (device detection)",
    "install the NVIDIA driver utilities (Debian: apt-get install nvidia-smi)",
    CUDA_OPTIONS,
)

# What nvcc's host compiler links into shared libraries, for the builds that compile CUDA.
CUDA_HOST = replace(CUDA_HOST_RUNTIME, rules=(Rule(options=CUDA_OPTIONS),))

NVIDIA_PROVIDERS: tuple[Provider, ...] = (
    CUDA,
    CUDA_HOST,
    CUDA_ARCH,
    CUDART,
    CUBLAS,
    CUBLASLT,
    NCCL,
    CUTLASS,
    TORCH,
    CUDA_DRIVER_LINK,
    CUDA_DRIVER,
    NVIDIA_SMI,
)
__all__ = ["NVIDIA_PROVIDERS", "device_tool"]
