"""NCCL, InfiniCCL's NCCL backend on NVIDIA: found where the wheel will load it from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from builder.providers import search
from builder.providers.libs import (
    LibrarySpec,
    library_reader,
    macro_reader,
    standard_candidates,
    toolkit_root,
    wheel_candidates,
)
from builder.providers.probe import BOTH, Candidate, Deps, ProbeContext, Provider, Reading, Rule

# InfiniCCL (1f3e24a) calls find_library(NCCL_LIB nccl) and find_path(NCCL_INC nccl.h) with no
# hints on NVIDIA: naming both files is the only way to make it take the one found here.
NCCL_SPEC = LibrarySpec(
    stem="nccl",
    header="nccl.h",
    version=macro_reader("nccl.h", ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")),
    dists=("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
    wheel_dirs=("nvidia/nccl",),
    link_define="NCCL_LIB",
    include_define="NCCL_INC",
    always_define=True,
)


def _nccl_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    """NCCL_ROOT/NCCL_HOME, then the copy in the target Python's nvidia-nccl wheel, then the
    toolkit and the system. The wheel's copy comes before the system's because it is the one
    that runs: torch (a requirement of the stack's wheel, imported first) loads
    ``nvidia/nccl/lib/libnccl.so.2``, and libinfiniccl's ``libnccl.so.2`` is then that one."""
    root = toolkit_root(deps, "cuda")
    env_vars = ("NCCL_ROOT", "NCCL_HOME")
    explicit = list(search.env_dirs(ctx, env_vars))
    if not explicit:
        yield from wheel_candidates(ctx, NCCL_SPEC)
    yield from standard_candidates(
        ctx, NCCL_SPEC, env_vars=env_vars, toolkit=root, toolkit_origin="cuda toolkit"
    )


def _read_nccl(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    reading = library_reader(NCCL_SPEC)(ctx, candidate, deps)
    if not reading.usable:
        return reading
    if "dist_info" not in candidate.extra:  # not the wheel's copy: is there one that will run?
        wheel = next(wheel_candidates(ctx, NCCL_SPEC), None)
        if wheel is not None:
            reading = replace(
                reading,
                notes=(
                    *reading.notes,
                    f"not what runs: the target Python's {wheel.origin} copy in {wheel.path} "
                    "is loaded first (torch imports it) wherever the wheel is installed beside "
                    "it; unset NCCL_ROOT/NCCL_HOME to build against that one",
                ),
            )
    if reading.defines.get("NCCL_INC"):
        root = Path(reading.defines["NCCL_INC"]).parent
        return replace(reading, defines={**reading.defines, "NCCL_ROOT": str(root)})
    return reading


NCCL = Provider(
    name="nccl",
    what="NCCL (InfiniCCL's NCCL backend)",
    needed_for=BOTH,
    rules=(Rule(names=frozenset({"infiniccl"}), options=("WITH_NCCL",)),),
    after=("cuda",),
    candidates=_nccl_candidates,
    read=_read_nccl,
    hint="pip install nvidia-nccl-cu13 (nvidia-nccl-cu12 for CUDA 12) into the target Python, "
    "or apt-get install libnccl-dev; or set NCCL_ROOT",
)
