"""How the dynamic loader meets the libraries that other Python distributions install.

A wheel's library may need a library another distribution installs (``libtorch.so`` from torch,
``flash_attn_2_cuda.cpython-312-….so`` from flash-attn). ld.so finds that one through the
wheel library's RUNPATH, but resolves *its* DT_NEEDED entries only through its own RUNPATH, the
system's directories, or a library of that name already loaded. A Python extension used as a
library (flash-attn's) usually has no RUNPATH: it finds ``libtorch_python.so`` only because
``import torch`` loaded it first. Loading the wheel then fails unless the wheel's library loads
that need itself; :func:`stranded_needs` names such needs, for the assembler (which adds them)
and the audit (which rejects a wheel that lacks them).

A need found through RUNPATH is found only where pip put the other distribution beside the
wheel, in the same site-packages. Installed in another site directory (a venv that sees the
system's packages, a ``.pth``), it is still importable, so the wheel imports what the policy
names (``import torch``) before its extensions load: ld.so then finds the library already
loaded, by its SONAME. A Python extension module used as a library (flash-attn's
``flash_attn_2_cuda``) has no SONAME, and ld.so never matches a need to an object it loaded by
path without one: such a library cannot be a DT_NEEDED at all (:func:`loaded_by_import`); the
wheel imports it and makes its symbols global (:data:`GLOBAL_CALL`) before its own libraries,
which leave it undefined, are loaded.
"""

from __future__ import annotations

import os
import posixpath
import re
import site
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING

from wheels.elf import ElfInfo, HostLibraries
from wheels.policy import DistLib

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence


# How a package's __init__.py makes an imported extension module's symbols global, so that the
# libraries loaded after it find them: RTLD_NOLOAD reopens the copy the import loaded.
GLOBAL_CALL = "_ctypes.CDLL({module}.__file__, _os.RTLD_NOW | _os.RTLD_GLOBAL | _os.RTLD_NOLOAD)"
GLOBAL_IMPORTS = ("import ctypes as _ctypes", "import os as _os")


def loaded_by_import(soname: str, lib: DistLib) -> bool:
    """Is ``soname`` the extension module ``lib``'s import loads (``flash_attn_2_cuda.cpython-
    312-x86_64-linux-gnu.so`` for ``import flash_attn_2_cuda``)? Built without a SONAME, it can
    only be loaded by that import, never found as a DT_NEEDED once installed elsewhere."""
    return lib.module is not None and soname.partition(".")[0] == lib.module.rpartition(".")[2]


def preload_modules(lib: DistLib) -> tuple[str, ...]:
    """What the package of an ELF needing ``lib``'s library imports, in order."""
    return (*lib.after, lib.module) if lib.module else ()


_SITE_ADDED: list[bool] = []


def site_dirs() -> tuple[Path, ...]:
    """Where this host has distributions installed: site-packages, then the other sys.path
    directories (a PYTHONPATH or ``pip --target`` install is importable too)."""

    if sys.flags.no_site and not _SITE_ADDED:  # started without site (bin/infini-stack's fast
        site.main()  # start of an audit): the directories site adds, as a normal start has them
        _SITE_ADDED.append(True)
    # The prefixes as they are now: site.main() moves sys.prefix into a venv, after sysconfig
    # may have read it.
    paths = sysconfig.get_paths(vars={"base": sys.prefix, "platbase": sys.exec_prefix})
    candidates = [
        *site.getsitepackages(),
        site.getusersitepackages(),
        paths["purelib"],
        paths["platlib"],
        *(p for p in sys.path if p),
    ]
    return tuple(dict.fromkeys(Path(c) for c in candidates if Path(c).is_dir()))


# The loader's: ``$ORIGINAL`` is no ``$ORIGIN``.
_ORIGIN = re.compile(r"\$(ORIGIN\b|\{ORIGIN\})")


def substitute_origin(entry: str, origin: str) -> str:
    """``entry`` with each ``$ORIGIN`` and ``${ORIGIN}`` replaced by ``origin``, taken
    literally."""
    return _ORIGIN.sub(lambda _: origin, entry)


def search_path(path: str, info: ElfInfo) -> list[str]:
    """The directories ld.so searches for the needs of the ELF at ``path`` (its RUNPATH, else
    RPATH, with ``$ORIGIN`` expanded); relative entries, which depend on the working
    directory, are left out."""
    origin = posixpath.dirname(path)
    entries = info.split_path("runpath") or info.split_path("rpath")
    return [
        posixpath.normpath(substitute_origin(e, origin))
        for e in entries
        if e.startswith(("/", "$"))
    ]


def installed_copy(
    lib: DistLib, soname: str, dirs: Sequence[Path], host: HostLibraries
) -> tuple[str, ElfInfo] | None:
    """(real path, ELF data) of ``soname`` where ``lib``'s distribution installed it here;
    ``host`` reads each file once (these libraries can be hundreds of megabytes)."""
    for site_dir in dirs:
        hit = host.locate(str(site_dir / lib.dir / soname))
        if hit is not None:
            return hit
    return None


def stranded_needs(
    path: str,
    info: ElfInfo,
    supplied: Mapping[str, DistLib],
    dirs: Sequence[Path],
    loaded: Collection[str],
) -> list[tuple[str, DistLib]]:
    """The needs of a distribution's library at ``path`` that ld.so will not find.

    A need counts when another distribution supplies it (``supplied``), no library of that name
    is ``loaded`` with it, and the library's own search path does not reach where that
    distribution installs it (in any of ``dirs``). A system library is never stranded here.
    """
    search = {os.path.realpath(d) for d in search_path(path, info)}
    out = []
    for soname in info.needed:
        lib = supplied.get(soname)
        if lib is None or soname in loaded:
            continue
        homes = {os.path.realpath(d / lib.dir) for d in dirs}
        if not homes & search:
            out.append((soname, lib))
    return out
