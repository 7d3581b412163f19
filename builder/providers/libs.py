"""Shared-library providers (headers + ``lib<stem>.so*``) and Python-distribution providers.

A library may live in a toolkit prefix, in the system's library directories, or in a wheel
installed into the target Python (``nvidia/*/lib``); wherever it is, the probe reports which
file the build will link, the version (from a header macro, else the wheel's METADATA, else the
file name), and the CMake cache variables that make the build take exactly that file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.providers import search
from builder.providers.probe import (
    Candidate,
    Deps,
    ProbeContext,
    Reading,
    unusable,
)

STANDARD_INCLUDES = (
    "CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES",
    "CMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES",
)
SYSTEM_INCLUDES = (Path("/usr/include"), Path("/usr/local/include"))

VersionReader = Callable[[Path], tuple[str | None, str]]  # include dir -> (version, source)


@dataclass(frozen=True, kw_only=True)
class LibrarySpec:
    stem: str  # "nccl" -> libnccl.so
    header: str | None = None  # a header the build includes, relative to an include dir
    version: VersionReader | None = None  # read the version from the include dir
    dists: tuple[str, ...] = ()  # wheels that ship it (their METADATA gives a version)
    wheel_dirs: tuple[str, ...] = ()  # where those wheels put it: "nvidia/cu13", "nvidia/nccl"
    link_define: str | None = None  # cache variable naming the library file (NCCL_LIB)
    include_define: str | None = None  # cache variable naming the include dir (NCCL_INC)
    always_define: bool = False  # pass the defines even for a toolkit or system install


def macro_reader(header: str, names: Sequence[str]) -> VersionReader:
    def read(include: Path) -> tuple[str | None, str]:
        path = include / header
        source = f"{header} {'/'.join(names)}"
        return (search.macro_version(path, names) if path.is_file() else None), source

    return read


def encoded_reader(header: str, macro: str) -> VersionReader:
    def read(include: Path) -> tuple[str | None, str]:
        path = include / header
        value = search.header_macros(path).get(macro) if path.is_file() else None
        return search.encoded_version(value), f"{header} {macro}"

    return read


# -- candidates ---------------------------------------------------------------------------------


def prefix_candidate(prefix: Path, origin: str, *, foreign: bool = False) -> Candidate:
    """A toolkit-like prefix: lib64/, lib/, targets/<arch>/lib beside include/."""
    libs = [prefix / "lib64", prefix / "lib"]
    includes = [prefix / "include"]
    for target in sorted(prefix.glob("targets/*")):
        libs.append(target / "lib")
        includes.append(target / "include")
    return Candidate(
        path=prefix,
        origin=origin,
        extra={"libs": tuple(libs), "includes": tuple(includes), "foreign": foreign},
    )


def system_candidate(ctx: ProbeContext) -> Candidate:
    return Candidate(
        path=Path("/usr"),
        origin="system library path",
        extra={
            "libs": tuple(search.system_lib_dirs(ctx)),
            "includes": SYSTEM_INCLUDES,
            "foreign": False,
        },
    )


def wheel_candidates(ctx: ProbeContext, spec: LibrarySpec) -> Iterator[Candidate]:
    """The library inside wheels installed into the target Python (``nvidia/*/lib``)."""
    patterns = [f"{d}/lib/lib{spec.stem}.so*" for d in spec.wheel_dirs]
    seen: set[Path] = set()
    for pattern in patterns:
        for hit in search.site_globs(ctx, pattern):
            prefix = hit.parent.parent
            if prefix in seen:
                continue
            seen.add(prefix)
            dist_info = _owning_dist(ctx, spec, prefix)
            origin = (
                f"site-packages ({dist_info.name.split('-')[0]})" if dist_info else "site-packages"
            )
            yield Candidate(
                path=prefix,
                origin=origin,
                extra={
                    "libs": (prefix / "lib",),
                    "includes": (prefix / "include",),
                    "dist_info": dist_info,
                    "foreign": True,
                },
            )


def _owning_dist(ctx: ProbeContext, spec: LibrarySpec, prefix: Path) -> Path | None:
    for dist_info in search.distributions(ctx, spec.dists):
        if prefix.is_relative_to(dist_info.parent):
            return dist_info
    return None


def standard_candidates(
    ctx: ProbeContext,
    spec: LibrarySpec,
    *,
    env_vars: Sequence[str] = (),
    toolkit: Path | None = None,
    toolkit_origin: str = "toolkit",
    system: bool = True,
) -> Iterator[Candidate]:
    """env vars, the toolkit, the system library path, then wheels in the target Python."""
    for env in search.env_dirs(ctx, env_vars):
        yield prefix_candidate(env.path, env.origin, foreign=True)
    if toolkit is not None:
        yield prefix_candidate(toolkit, toolkit_origin)
    if system:
        yield system_candidate(ctx)
    yield from wheel_candidates(ctx, spec)


def toolkit_root(deps: Deps, name: str) -> Path | None:
    """The root a toolkit provider found (its result's define, else its path's grandparent)."""
    result = deps.get(name)
    if result is None or not result.ok or not result.path:
        return None
    root = result.defines.get("CUDAToolkit_ROOT") or result.defines.get("MUSA_ROOT")
    return Path(root) if root else Path(result.path).parent.parent


# -- reading one candidate -----------------------------------------------------------------------


def library_reader(spec: LibrarySpec) -> Callable[[ProbeContext, Candidate, Deps], Reading]:
    def read(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
        return read_library(spec, ctx, candidate)

    return read


def read_library(spec: LibrarySpec, ctx: ProbeContext, candidate: Candidate) -> Reading:
    if not candidate.path.exists():
        return unusable("does not exist")
    located = _locate(spec, candidate)
    if located is None:
        return unusable(f"no lib{spec.stem}.so* there")
    lib_dir, link, versioned = located
    library = link or (versioned[0] if versioned else None)
    assert library is not None
    include = _include_dir(spec, candidate, lib_dir)
    if spec.header and include is None and ctx.purpose == "build":
        return unusable(
            f"lib{spec.stem} is there but not {spec.header} "
            "(a runtime-only install: the development files are missing)"
        )
    version, source, notes = _version(spec, candidate, include, library)
    defines: dict[str, str] = {}
    foreign = bool(candidate.extra.get("foreign"))
    if ctx.purpose == "build":
        notes += _link_name_notes(spec, link, versioned)
        if spec.link_define and (foreign or spec.always_define or link is None):
            defines[spec.link_define] = str(library)
        if spec.include_define and include is not None and (foreign or spec.always_define):
            defines[spec.include_define] = str(include)
        if foreign and include is not None and include not in SYSTEM_INCLUDES:
            defines.update({key: str(include) for key in STANDARD_INCLUDES})
    return Reading(
        version=version,
        source=source,
        path=library,
        notes=notes,
        defines=defines,
        problem=None if version else f"cannot tell the version of {library.name}",
    )


def _locate(spec: LibrarySpec, candidate: Candidate) -> tuple[Path, Path | None, list[Path]] | None:
    for lib_dir in candidate.extra.get("libs", (candidate.path,)):
        if not lib_dir.is_dir():
            continue
        link, versioned = search.library_files(lib_dir, spec.stem)
        if link or versioned:
            return lib_dir, link, versioned
    return None


def _include_dir(spec: LibrarySpec, candidate: Candidate, lib_dir: Path) -> Path | None:
    if spec.header is None:
        return None
    includes = [*candidate.extra.get("includes", ()), lib_dir.parent / "include"]
    return next((d for d in includes if (d / spec.header).is_file()), None)


def _version(
    spec: LibrarySpec, candidate: Candidate, include: Path | None, library: Path
) -> tuple[str | None, str, tuple[str, ...]]:
    notes: tuple[str, ...] = ()
    version: str | None = None
    source = ""
    if spec.version is not None and include is not None:
        version, source = spec.version(include)
    dist_info = candidate.extra.get("dist_info")
    if version is None and isinstance(dist_info, Path):
        version, source = search.metadata_version(dist_info), f"{dist_info.name} METADATA"
    if version is None:
        version, source = search.file_name_version(library, spec.stem), "library file name"
    so = search.soname(library)
    if (
        version
        and so
        and (major := so.rsplit(".so.", 1)[-1].split(".")[0]).isdigit()
        and version.split(".")[0] != major
    ):
        notes += (f"{source} says {version} but the library's SONAME is {so}",)
    return version, source, notes


def _link_name_notes(
    spec: LibrarySpec, link: Path | None, versioned: list[Path]
) -> tuple[str, ...]:
    if link is not None or not versioned:
        return ()
    fix = (
        f"this tool passes {spec.link_define}={versioned[0]}"
        if spec.link_define
        else f"create lib{spec.stem}.so -> {versioned[0].name} in {versioned[0].parent}"
    )
    return (
        f"no unversioned link name lib{spec.stem}.so beside {versioned[0].name}, so "
        f"find_library({spec.stem}) cannot find it: {fix}",
    )


# -- Python distributions -------------------------------------------------------------------------


def dist_candidates(
    names: Sequence[str], package: str | None = None
) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        for dist_info in search.distributions(ctx, names):
            path = dist_info.parent / package if package else dist_info
            yield Candidate(path=path, origin="site-packages", extra={"dist_info": dist_info})

    return candidates


def read_dist(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    dist_info = candidate.extra.get("dist_info")
    if not isinstance(dist_info, Path) or not candidate.path.exists():
        return unusable("is not installed there")
    version = search.metadata_version(dist_info)
    return Reading(
        version=version,
        source="dist-info METADATA",
        problem=None if version else f"no Version in {dist_info}/METADATA",
    )
