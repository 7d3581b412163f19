"""CPU providers: OpenMP (InfiniRT's CPU backend) and MPI (InfiniCCL's OMPI/MPICH backends)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from builder.providers import search
from builder.providers.probe import (
    BOTH,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    unusable,
)

# _OPENMP (yyyymm) -> the OpenMP specification it stands for.
OPENMP_SPECS = {
    "200505": "2.5",
    "200805": "3.0",
    "201107": "3.1",
    "201307": "4.0",
    "201511": "4.5",
    "201811": "5.0",
    "202011": "5.1",
    "202111": "5.2",
    "202411": "6.0",
}


OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so")


def _openmp_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    cxx = deps.get("cxx")
    if cxx is not None and cxx.ok and cxx.path:
        yield Candidate(path=Path(cxx.path), origin="the C++ compiler")
    for directory in search.system_lib_dirs(ctx):  # what a program loads at run time
        for name in OPENMP_RUNTIMES:
            if (directory / name).exists():
                yield Candidate(
                    path=directory / name, origin="system library path", extra={"runtime": True}
                )


def _read_openmp(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    """``_OPENMP`` with omp.h included (so a missing header fails here), then the runtime."""
    if candidate.extra.get("runtime"):
        if ctx.purpose == "build":
            return unusable("a runtime library only: building needs omp.h and -fopenmp")
        return Reading(source="")
    compiler = str(candidate.path)
    code, out = search.tool_output(
        [compiler, "-fopenmp", "-dM", "-E", "-x", "c++", "-include", "omp.h", "/dev/null"], ctx
    )
    if code != 0:
        return unusable(f"`-fopenmp` with omp.h does not preprocess: {out.strip()[-200:]}")
    stamp = search.first_match(r"#define _OPENMP (\d+)", out)
    if stamp is None:
        return unusable("-fopenmp does not define _OPENMP")
    runtime = _openmp_runtime(compiler, ctx)
    version = OPENMP_SPECS.get(stamp)
    return Reading(
        version=version,
        source=f"_OPENMP {stamp} from {candidate.path.name} -fopenmp",
        path=runtime or candidate.path,
        problem=None if version else f"unknown _OPENMP value {stamp}",
        notes=() if runtime else ("the OpenMP runtime library was not located",),
    )


def _openmp_runtime(compiler: str, ctx: ProbeContext) -> Path | None:
    for name in ("libgomp.so", "libomp.so", "libiomp5.so"):
        code, out = search.tool_output([compiler, f"-print-file-name={name}"], ctx)
        path = Path(out.strip()) if code == 0 and out.strip() else None
        if path is not None and path.is_absolute() and path.exists():
            return path.resolve()
    return None


OPENMP = Provider(
    name="openmp",
    what="OpenMP (InfiniRT's CPU backend)",
    needed_for=BOTH,
    rules=(Rule(options=("WITH_CPU",)),),
    after=("cxx",),
    candidates=_openmp_candidates,
    read=_read_openmp,
    hint="GCC ships OpenMP (apt-get install g++ libgomp1); for clang: apt-get install libomp-dev",
)


# -- MPI -------------------------------------------------------------------------------------------

MPI_ENV_VARS = ("MPI_HOME", "MPI_ROOT")
MPI_WRAPPERS = ("mpicxx", "mpic++", "mpicc")
MPI_DEFAULTS = (
    "/usr/lib/x86_64-linux-gnu/openmpi",
    "/usr/lib/aarch64-linux-gnu/openmpi",
    "/usr/lib/x86_64-linux-gnu/mpich",
    "/usr/lib/aarch64-linux-gnu/mpich",
    "/usr/lib64/openmpi",
    "/usr/lib64/mpich",
    "/opt/openmpi",
)


def _mpi_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    # FindMPI's order: MPI_HOME, then the compiler wrappers on PATH, then well-known prefixes.
    yield from search.env_dirs(ctx, MPI_ENV_VARS)
    yield from search.on_path(ctx, MPI_WRAPPERS)
    yield from search.default_dirs(MPI_DEFAULTS)


def _mpi_header(ctx: ProbeContext, candidate: Candidate) -> Path | None:
    path = candidate.path
    if path.is_dir():
        for sub in ("include/mpi.h", "include/openmpi/mpi.h", "include/mpich/mpi.h"):
            if (path / sub).is_file():
                return path / sub
        return None
    root = path.resolve().parent.parent
    if (root / "include" / "mpi.h").is_file():
        return root / "include" / "mpi.h"
    for flag in ("--showme:incdirs", "-show"):
        code, out = search.tool_output([str(path), flag], ctx)
        if code != 0:
            continue
        dirs = re.findall(r"-I(\S+)", out) if flag == "-show" else out.split()
        for d in dirs:
            if (Path(d) / "mpi.h").is_file():
                return Path(d) / "mpi.h"
    return None


def mpi_version(header: Path) -> tuple[str | None, str]:
    macros = search.header_macros(header)
    if "OMPI_MAJOR_VERSION" in macros:
        version = search.macros_version(
            macros, ("OMPI_MAJOR_VERSION", "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION")
        )
        return version, "mpi.h OMPI_MAJOR/MINOR/RELEASE_VERSION (Open MPI)"
    if "MPICH_VERSION" in macros:
        return search.first_match(
            r"^(\d+(?:\.\d+)*)", macros["MPICH_VERSION"]
        ), "mpi.h MPICH_VERSION (MPICH)"
    return None, "mpi.h"


def _read_mpi(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    if not candidate.path.exists():
        return unusable("does not exist")
    header = _mpi_header(ctx, candidate)
    if header is None:
        return unusable("no mpi.h there (an MPI runtime without its development files?)")
    version, source = mpi_version(header)
    defines = {"MPI_HOME": str(header.parent.parent)} if candidate.origin != "PATH" else {}
    return Reading(
        version=version,
        source=source,
        path=header,
        defines=defines,
        problem=None if version else f"no version macros in {header}",
    )


MPI = Provider(
    name="mpi",
    what="MPI (InfiniCCL's OMPI/MPICH backend)",
    needed_for=BOTH,
    rules=(Rule(names=frozenset({"infiniccl"}), options=("WITH_OMPI", "WITH_MPICH")),),
    candidates=_mpi_candidates,
    read=_read_mpi,
    hint="apt-get install libopenmpi-dev openmpi-bin (or libmpich-dev), or set MPI_HOME",
)

CPU_PROVIDERS: tuple[Provider, ...] = (OPENMP, MPI)
