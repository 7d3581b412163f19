"""The path maps of a component's build: the compiler flags that keep this machine's paths (the
checkout, the build directory, the store) out of what it compiles. Pure, as :mod:`builder.plan`
is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# Included by every project() of a component's build: it adds the prefix maps as compile options.
PREFIX_MAPS_CMAKE = Path(__file__).parent / "cmake" / "prefix_maps.cmake"


def path_maps(name: str, source_dir: Path, build_dir: Path, store: Path) -> dict[str, str]:
    """Compiler flags that keep this machine's paths out of the binaries: ``__FILE__`` in
    asserts and the debug info name ``/infini-stack/...`` instead of the checkout, the build
    directory and the store (whose headers other components compile in). A store entry is then
    relocatable (the remote cache pushes no entry with a path it cannot rewrite) and a build
    elsewhere reproduces it.

    The flags travel as a CMake list, one element a flag, and :data:`PREFIX_MAPS_CMAKE` adds
    them with ``add_compile_options``, which quotes each for the shell: a directory whose path
    has a space or a shell-special character builds (in ``CMAKE_CXX_FLAGS_INIT`` the flags
    were split at every space)."""
    return {
        "CMAKE_PROJECT_INCLUDE": str(PREFIX_MAPS_CMAKE),
        "INFINI_STACK_PREFIX_MAPS": ";".join(prefix_maps(name, source_dir, build_dir, store)),
    }


def prefix_maps(name: str, source_dir: Path, build_dir: Path, store: Path) -> list[str]:
    """The ``-ffile-prefix-map`` flags of :func:`path_maps`, one a flag."""
    return [
        f"-ffile-prefix-map={path}=/infini-stack/{where}"
        for path, where in (
            (source_dir, f"src/{name}"),
            (build_dir, f"build/{name}"),
            (store, "store"),
        )
    ]


def all_path_maps(
    name: str, source_dir: Path, build_dir: Path, store: Path, defines: Mapping[str, str]
) -> dict[str, str]:
    """:func:`path_maps` for C and C++, and for CUDA where the vendor compiles it."""
    maps = prefix_maps(name, source_dir, build_dir, store)
    cuda = cuda_path_maps(maps, defines.get("CMAKE_CUDA_FLAGS_INIT"))
    return {**path_maps(name, source_dir, build_dir, store), **cuda}


def cuda_path_maps(maps: list[str], cuda_flags: str | None) -> dict[str, str]:
    """The host compiler's prefix maps for nvcc, where the vendor compiles CUDA (it sets
    ``CMAKE_CUDA_FLAGS_INIT``): nvcc preprocesses device code with the host compiler too, so
    ``__FILE__`` in kernels (asserts, printf) is mapped as well and two builds under different
    directories give the same device code. nvcc passes ``-Xcompiler``'s text to a shell as it
    is, so each flag is double-quoted for it (a path with a single quote nvcc cannot compile
    at all, with or without maps)."""
    if cuda_flags is None:
        return {}
    return {
        "INFINI_STACK_CUDA_PREFIX_MAPS": ";".join(f"-Xcompiler={_sh_double(f)}" for f in maps),
        # cudafe++ names anonymous namespaces after the source's path: it is given the mapped
        # one (builder/cmake/nvcc_source_name.sh).
        "INFINI_STACK_SOURCE_MAPS": ";".join(m.removeprefix("-ffile-prefix-map=") for m in maps),
    }


def _sh_double(text: str) -> str:
    """``text`` in double quotes for a POSIX shell."""
    escaped = "".join("\\" + c if c in '\\"$`' else c for c in text)
    return f'"{escaped}"'
