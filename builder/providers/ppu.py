"""T-Head PPU providers: the PPU SDK's CUDA-compatible toolkit, its architectures, and ppu-smi.

Upstream's order: THEAD_CUDA_ROOT, PPU_CUDA_ROOT, $PPU_SDK_ROOT/CUDA_SDK,
/usr/local/PPU_SDK/CUDA_SDK; no PATH fallback (an nvcc on PATH is far more likely NVIDIA's).
The SDK's own version is read from ``<sdk>/bin/ppu-llc --version`` (``ppu version: 2.1.0``, as
PPU SDK CI images print it; inferred, not from T-Head documentation); the CUDA release its nvcc
reports is a note.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from builder.providers import search
from builder.providers.cuda import CUDA_ARCH, device_tool, read_nvcc_toolkit
from builder.providers.probe import (
    BUILD,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    unusable,
)

THEAD_RULE = Rule(toolkit=True, options=("WITH_THEAD", "WITH_NVIDIA", "INFINILM_WITH_CUDA"))


def _sdk_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    yield from search.place_dirs(ctx, ctx.places)


def sdk_root(ctx: ProbeContext, cuda_root: Path) -> Path:
    """The PPU SDK a CUDA_SDK directory belongs to: $PPU_SDK_ROOT, else its parent."""
    env = ctx.getenv("PPU_SDK_ROOT")
    if env and (Path(env) / "CUDA_SDK").resolve() == cuda_root.resolve():
        return Path(env)
    return cuda_root.parent if cuda_root.name == "CUDA_SDK" else cuda_root


def _read_sdk(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    nvcc, release, problem = read_nvcc_toolkit(ctx, candidate)
    if not nvcc.is_file():
        return unusable(problem)
    sdk = sdk_root(ctx, candidate.path)
    llc = sdk / "bin" / "ppu-llc"
    version = None
    if llc.is_file():
        _, out = search.tool_output([str(llc), "--version"], ctx)
        version = search.first_match(r"ppu version:\s*(\d+\.\d+(?:\.\d+)?)", out)
        why = f"no 'ppu version:' in `ppu-llc --version`: {out.strip()[-120:]!r}"
    else:
        why = f"cannot read the PPU SDK version: no {llc}"
    notes = (f"its nvcc is CUDA-compatible release {release}",) if release else ()
    return Reading(
        version=version,
        source="ppu-llc --version",
        path=nvcc,
        notes=notes,
        defines={"CUDAToolkit_ROOT": str(candidate.path), "CMAKE_CUDA_COMPILER": str(nvcc)},
        problem=None if version else why,
    )


PPU_SDK = Provider(
    name="ppu-sdk",
    what="PPU SDK (CUDA-compatible nvcc)",
    needed_for=BUILD,
    rules=(THEAD_RULE,),
    candidates=_sdk_candidates,
    read=_read_sdk,
    hint="install the PPU SDK at /usr/local/PPU_SDK (CUDA_SDK inside), or set PPU_SDK_ROOT "
    "(or THEAD_CUDA_ROOT to its CUDA_SDK)",
)

PPU_ARCH = replace(
    CUDA_ARCH,
    requires=("ppu-sdk",),
    rules=(THEAD_RULE,),
    what="the requested architectures, as the PPU SDK's nvcc lists them",
)

PPU_SMI = device_tool(
    "ppu-smi",
    "ppu-smi (device detection)",
    "install the PPU driver (it ships ppu-smi)",
    ("WITH_THEAD",),
)

THEAD_PROVIDERS: tuple[Provider, ...] = (PPU_SDK, PPU_ARCH, PPU_SMI)
