"""auditwheel's lddtree over ELF data read in memory: what each ELF file of a wheel loads, and
from where, as ``auditwheel show`` resolves it (mirrors ``auditwheel/lddtree.py``).

The unpacked wheel auditwheel would look at is modelled by :class:`Files`: a member path is a
place in the wheel, an absolute path a place on this host (read through
:class:`~wheels.elf.HostLibraries`). Both are ``(in_wheel, path)`` pairs.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from wheels.elf import ElfInfo, HostLibraries

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

_ORIGIN = re.compile(r"\$(ORIGIN|\{ORIGIN\})")  # auditwheel's
LIBPYTHON_RE = re.compile(r"^libpython\d+\.\d+m?.so(\.\d)*$")
_WHEEL_ROOT = "/\0wheel"
_MAX_DEPTH = 256


def is_libpython(soname: str) -> bool:
    """Does ``soname`` match :data:`LIBPYTHON_RE`?"""
    return LIBPYTHON_RE.match(soname) is not None


def host_library_dirs(libc: str = "glibc") -> tuple[str, ...]:
    """Where auditwheel (and so this audit) looks for system libraries: no ld.so.cache."""
    env, conf = host_search(libc)
    return tuple(dict.fromkeys([*env, *conf]))


@lru_cache(maxsize=4)
def host_search(libc: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """auditwheel's ``load_ld_paths``: $AUDITWHEEL_LD_LIBRARY_PATH and $LD_LIBRARY_PATH, then
    ld.so.conf (musl: /etc/ld-musl-*.path) and the trusted directories; cached per process as
    auditwheel's is. An $ORIGIN in those variables, which auditwheel fails on, is left out."""
    value = ":".join(
        filter(
            None, (os.environ.get("AUDITWHEEL_LD_LIBRARY_PATH"), os.environ.get("LD_LIBRARY_PATH"))
        )
    )
    env = _parse_ld_paths(value) if value else []
    if libc == "musl":
        conf = _musl_conf()
    else:
        conf = _parse_ld_so_conf("//etc/ld.so.conf", first=True)
        conf += ["/lib", "/lib64/", "/usr/lib", "/usr/lib64"]
    return tuple(env), tuple(conf)


def _normpath(path: str) -> str:
    return os.path.normpath(path).replace("//", "/")


def _existing(paths: Iterable[str]) -> list[str]:
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]


def _parse_ld_paths(value: str) -> list[str]:
    """auditwheel's parse_ld_paths with no object path (an empty entry is the cwd)."""
    out = [
        _normpath(os.getcwd() if entry == "" else "/" + entry)
        for entry in value.split(":")
        if not _ORIGIN.search(entry)
    ]
    return _existing(out)


def _parse_ld_so_conf(conf: str, *, first: bool = False) -> list[str]:
    """auditwheel's parse_ld_so_conf with root "/": comments, blank lines, includes (globbed)."""
    paths: list[str] = []
    try:
        with open(conf, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.readlines()
    except OSError:
        lines = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            pattern = line[8:]
            pattern = (
                "/" + pattern.lstrip("/")
                if pattern[0] == "/"
                else (os.path.dirname(conf) + "/" + pattern)
            )
            for path in glob.glob(pattern):
                paths += _parse_ld_so_conf(path)
        else:
            paths.append(_normpath("/" + line))
    return _existing(paths) if first else paths


def _musl_conf() -> list[str]:
    found = glob.glob("//etc/ld-musl-*.path")
    if not found:
        return ["//lib", "//usr/local/lib", "//usr/lib"]
    with open(found[0], encoding="utf-8") as fh:
        return ["/" + d.strip() for d in fh.read().split(":") if d.strip()]


@dataclass(frozen=True, slots=True)
class Lib:
    """One library of an ELF tree, as auditwheel's lddtree records it."""

    soname: str
    realpath: str | None
    in_wheel: bool
    info: ElfInfo | None
    needed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tree:
    """auditwheel's DynamicExecutable: one ELF file and what it loads."""

    path: str
    info: ElfInfo
    libc: str | None
    needed: tuple[str, ...]
    libraries: dict[str, Lib]


@dataclass
class _Search:
    """The ldpaths dict auditwheel threads through one ``ldd`` call tree."""

    env: list[tuple[bool, str]]
    conf: list[tuple[bool, str]]
    interp: list[tuple[bool, str]]
    rpath: list[tuple[bool, str]]
    runpath: list[tuple[bool, str]]


class Files:
    """The unpacked wheel, as auditwheel would see it on disk, plus the host's libraries."""

    def __init__(self, members: Mapping[str, ElfInfo | None], host: HostLibraries) -> None:
        self.members = members
        self.host = host
        self.dirs = {""}
        for member in members:
            parent = _dirname(member)
            while parent not in self.dirs:
                self.dirs.add(parent)
                parent = _dirname(parent)

    def is_dir(self, where: tuple[bool, str]) -> bool:
        in_wheel, path = where
        return path in self.dirs if in_wheel else os.path.isdir(path)

    def lookup(self, where: tuple[bool, str], soname: str) -> tuple[str, bool, ElfInfo] | None:
        in_wheel, path = where
        if in_wheel:
            member = posixpath.join(path, soname) if path else soname
            info = self.members.get(member)
            return (member, True, info) if info is not None else None
        hit = self.host.locate(f"{path.rstrip('/')}/{soname}")
        return (hit[0], False, hit[1]) if hit is not None else None


def _dirname(path: str) -> str:
    """posixpath.dirname, without its checks for the names that need them (a leading or a
    doubled slash): torch's 12,248 names in 5 ms, not 10."""
    if path[:1] == "/" or "//" in path:
        return posixpath.dirname(path)
    return path.rpartition("/")[0]


def _substitute_origin(entry: str, origin: str) -> str:
    return _ORIGIN.sub(lambda _: origin, entry)


def _ld_dirs(value: str | None, origin: tuple[bool, str], files: Files) -> list[tuple[bool, str]]:
    """auditwheel's parse_ld_paths: split, expand $ORIGIN, normalise, keep existing dirs."""
    if not value:
        return []
    out: list[tuple[bool, str]] = []
    in_wheel, origin_dir = origin
    for entry in value.split(":"):
        if entry == "":
            where = (True, "")  # the current directory: auditwheel works in the unpacked wheel
        elif _ORIGIN.search(entry):
            base = f"{_WHEEL_ROOT}/{origin_dir}" if in_wheel else origin_dir
            where = _split_root(posixpath.normpath(_substitute_origin(entry, base)))
        else:
            where = (False, posixpath.normpath("/" + entry).replace("//", "/"))
        if where not in out and files.is_dir(where):
            out.append(where)
    return out


def _split_root(path: str) -> tuple[bool, str]:
    if path == _WHEEL_ROOT:
        return True, ""
    if path.startswith(_WHEEL_ROOT + "/"):
        return True, path[len(_WHEEL_ROOT) + 1 :]
    if path.startswith("/\0"):
        return False, "/nonexistent" + path[2:].replace("\0", "")
    # Escaped the unpacked wheel: a temporary directory's parents, which hold nothing.
    return False, "/nonexistent/" + path.lstrip("/")


def _tree_libc(info: ElfInfo, needed: Sequence[str], path: str) -> str | None:
    if info.interpreter:
        return "musl" if posixpath.basename(info.interpreter).startswith("ld-musl-") else "glibc"
    for soname in needed:
        if soname.startswith(("libc.musl-", "ld-musl-")):
            return "musl"
        if soname == "libc.so.6" or soname.startswith(("ld-linux-", "ld64.so.")):
            return "glibc"
    name = posixpath.basename(path)
    if name.endswith(("-arm-linux-musleabihf.so", "-linux-musl.so")):
        return "musl"
    if name.endswith(("-arm-linux-gnueabihf.so", "-linux-gnu.so")):
        # Before Python 3.11 musl builds also said "gnu" (auditwheel's rule).
        soabi = name[: -len(".so")].split(".")[-1].split("-")
        modern = len(soabi) > 1 and any(soabi[1].startswith(f"3{m}") for m in range(11, 100))
        if soabi[0] == "cpython" and modern:
            return "glibc"
    return None


def ldd(
    path: str,
    info: ElfInfo,
    files: Files,
    exclude: Callable[[str], bool],
    search: _Search | None = None,
    all_libs: dict[str, Lib] | None = None,
    depth: int = 0,
) -> Tree:
    """auditwheel.lddtree.ldd over in-memory ELF data; ``path`` is a member or a host path."""
    first = all_libs is None
    libs: dict[str, Lib] = {} if all_libs is None else all_libs
    in_wheel = not path.startswith("/")
    origin = (in_wheel, posixpath.dirname(path))
    rpaths = _ld_dirs(info.rpath, origin, files)
    runpaths = _ld_dirs(info.runpath, origin, files)
    if runpaths:
        rpaths = []
    libc = _tree_libc(info, info.needed, path) if first else None
    if search is None:
        search = _root_search(info, libc, rpaths, runpaths, libs)
    # auditwheel's order, the first ELF's RPATH and RUNPATH included for every dependency.
    dirs = [
        *search.rpath,
        *rpaths,
        *runpaths,
        *search.env,
        *search.runpath,
        *search.conf,
        *search.interp,
    ]
    needed: list[str] = []
    for soname in info.needed:
        if exclude(soname):
            continue
        needed.append(soname)
        if soname in libs:
            continue
        if is_libpython(soname) or depth >= _MAX_DEPTH:
            libs[soname] = Lib(soname, None, False, None)
            continue
        found = _find(files, info, soname, dirs)
        if found is None:
            libs[soname] = Lib(soname, None, False, None)
            continue
        real, lib_in_wheel, lib_info = found
        libs[soname] = Lib(soname, real, lib_in_wheel, lib_info)
        dep = ldd(real, lib_info, files, exclude, search, libs, depth + 1)
        libs[soname] = Lib(soname, real, lib_in_wheel, lib_info, dep.needed)
    return Tree(path, info, libc, tuple(needed), libs)


def _root_search(
    info: ElfInfo,
    libc: str | None,
    rpaths: list[tuple[bool, str]],
    runpaths: list[tuple[bool, str]],
    libs: dict[str, Lib],
) -> _Search:
    """The search path of the tree's root, which its dependencies inherit; the interpreter the
    root names counts as loaded."""
    interp: list[tuple[bool, str]] = []
    if info.interpreter:
        interp_path = posixpath.normpath("/" + info.interpreter).replace("//", "/")
        soname = posixpath.basename(interp_path)
        real = os.path.realpath(interp_path)
        libs[soname] = Lib(soname, real, False, info)
        idir = posixpath.dirname(interp_path)
        interp = [(False, idir), (False, posixpath.normpath("/usr" + idir))]
    env, conf = host_search(libc or "glibc")
    return _Search([(False, d) for d in env], [(False, d) for d in conf], interp, rpaths, runpaths)


def _find(
    files: Files, like: ElfInfo, soname: str, dirs: Iterable[tuple[bool, str]]
) -> tuple[str, bool, ElfInfo] | None:
    for where in dirs:
        hit = files.lookup(where, soname)
        if hit is not None and like.is_compatible(hit[2]):
            return hit
    return None
