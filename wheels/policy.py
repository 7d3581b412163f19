"""Policy as data: what each vendor expects outside a wheel, and the manylinux platform verdict.

``policy/vendors.json`` says, per canonical vendor, which libraries the machine supplies (the
driver: ``external``, fnmatch patterns allowed) and which other Python distributions supply
which libraries, in which directory of site-packages (``distributions``; ``"."`` is the top of
site-packages, where a torch extension such as flash-attn's ``flash_attn_2_cuda`` lives).

:func:`platform_verdict` computes the most compatible platform tag a wheel's ELF files allow,
following auditwheel 6.8's ``analyze_wheel_abi`` step by step (symbol-version limits per policy,
whitelisted libraries, blacklisted symbols, ISA extensions, the rule that a library outside the
wheel and outside the whitelist means ``linux_<arch>``), over ELF data read in memory instead of
an unpacked wheel. It uses auditwheel's own policy data through ``auditwheel.policy``.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from builder.core.errors import StackError
from wheels.elf import ElfInfo, HostLibraries

VENDORS = ("cpu", "nvidia", "moore", "thead")


@dataclass(frozen=True)
class DistLib:
    """A library that another Python distribution installs into ``dir`` of site-packages."""

    distribution: str
    dir: str
    # The Python module whose import loads this library (torch: libtorch_python.so). Such a
    # library may only be loaded after that import; see wheels.loading.
    module: str | None = None


@dataclass(frozen=True)
class VendorPolicy:
    name: str
    external: tuple[str, ...]
    distributions: Mapping[str, DistLib] = field(default_factory=lambda: MappingProxyType({}))

    def is_external(self, soname: str) -> bool:
        return any(fnmatchcase(soname, pattern) for pattern in self.external)

    def supplier(self, soname: str) -> DistLib | None:
        return self.distributions.get(soname)

    def outside_wheel(self, soname: str) -> bool:
        """Libraries the vendor expects to come from the machine or another distribution."""
        return self.is_external(soname) or soname in self.distributions


def load_vendor_policy(name: str) -> VendorPolicy:
    """The policy of vendor ``name`` (aliases such as ``ali`` accepted)."""
    if name in VENDORS:
        return _policies()[name]
    from builder.vendors import canonical_name  # the registry, for aliases and suggestions

    return _policies()[canonical_name(name)]


@functools.lru_cache(maxsize=1)
def _policies() -> dict[str, VendorPolicy]:
    text = resources.files("wheels").joinpath("policy/vendors.json").read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StackError(f"wheels/policy/vendors.json: line {exc.lineno}: {exc.msg}") from None
    problems: list[str] = []
    policies = {
        v: _vendor_from(v, data.get(v) if isinstance(data, dict) else None, problems)
        for v in VENDORS
    }
    if isinstance(data, dict):
        problems += [f"{k}: not a known vendor" for k in data if k not in VENDORS]
    if problems:
        raise StackError("wheels/policy/vendors.json: " + "; ".join(problems))
    return policies


def _vendor_from(name: str, raw: Any, problems: list[str]) -> VendorPolicy:
    if not isinstance(raw, dict):
        problems.append(f"{name}: missing or not an object")
        return VendorPolicy(name, ())
    external = raw.get("external", [])
    if not isinstance(external, list) or not all(isinstance(e, str) for e in external):
        problems.append(f"{name}.external: expected a list of strings")
        external = []
    dists: dict[str, DistLib] = {}
    raw_dists = raw.get("distributions", {})
    if not isinstance(raw_dists, dict):
        problems.append(f"{name}.distributions: expected an object")
        raw_dists = {}
    for soname, entry in raw_dists.items():
        where = f"{name}.distributions.{soname}"
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) and entry.get(k) for k in ("distribution", "dir")
        ):
            problems.append(f"{where}: expected {{'distribution': str, 'dir': str}}")
            continue
        module = entry.get("import")
        if module is not None and not (isinstance(module, str) and module.isidentifier()):
            problems.append(f"{where}.import: expected a module name")
            module = None
        unknown = sorted(set(entry) - {"distribution", "dir", "import"})
        problems += [f"{where}: unknown key '{k}'" for k in unknown]
        where_in_site = posixpath.normpath(entry["dir"])
        if where_in_site == ".":  # site-packages itself, which the audit calls ""
            where_in_site = ""
        dists[soname] = DistLib(entry["distribution"], where_in_site, module)
    known = ("external", "distributions")
    problems += [f"{name}: unknown key '{k}'" for k in raw if k not in known]
    return VendorPolicy(name, tuple(external), MappingProxyType(dists))


# ---------------------------------------------------------------------------------------------
# The CPython C API: an ELF that defines these carries an interpreter of its own.

# Families of CPython's C API (Include/*.h): ``Py<Family>_...``. A project's own ``PyImaging_*``
# (Pillow) or ``PyArray_*`` (NumPy) is not the interpreter and must not be mistaken for it.
PYTHON_API_FAMILIES = frozenset(
    {
        "AST",
        "Arg",
        "AsyncGen",
        "BaseObject",
        "Bool",
        "Buffer",
        "ByteArray",
        "Bytes",
        "CFunction",
        "CMethod",
        "CallIter",
        "Callable",
        "Capsule",
        "Cell",
        "ClassMethod",
        "Code",
        "Codec",
        "Compile",
        "Complex",
        "Config",
        "Context",
        "ContextToken",
        "ContextVar",
        "Coro",
        "Descr",
        "Dict",
        "DictProxy",
        "Ellipsis",
        "Enum",
        "Err",
        "Eval",
        "Exc",
        "Exception",
        "File",
        "Filter",
        "Float",
        "Frame",
        "FrozenSet",
        "Function",
        "GC",
        "GILState",
        "Gen",
        "Hash",
        "Import",
        "InstanceMethod",
        "Interpreter",
        "InterpreterState",
        "Iter",
        "List",
        "Long",
        "Map",
        "Mapping",
        "Marshal",
        "Mem",
        "MemoryView",
        "Method",
        "Module",
        "ModuleDef",
        "Mutex",
        "Node",
        "Number",
        "OS",
        "Object",
        "Parser",
        "PickleBuffer",
        "PreConfig",
        "Property",
        "Range",
        "Reversed",
        "Run",
        "Seq",
        "SeqIter",
        "Sequence",
        "Set",
        "Slice",
        "State",
        "StaticMethod",
        "Status",
        "StructSequence",
        "Super",
        "Sys",
        "Thread",
        "ThreadState",
        "Time",
        "TraceBack",
        "TraceMalloc",
        "Tuple",
        "Type",
        "Unicode",
        "UnicodeDecodeError",
        "UnicodeEncodeError",
        "UnicodeTranslateError",
        "Unstable",
        "Vectorcall",
        "WeakRef",
        "Weakref",
        "WideStringList",
        "Wrapper",
        "Zip",
    }
)
# Symbols every libpython defines: one of these exported means an interpreter is linked in.
PYTHON_CORE = frozenset(
    {
        "Py_Initialize",
        "Py_InitializeEx",
        "Py_InitializeFromConfig",
        "Py_Finalize",
        "Py_FinalizeEx",
        "Py_Main",
        "Py_BytesMain",
        "Py_RunMain",
        "Py_IsInitialized",
        "PyEval_EvalCode",
        "PyRun_SimpleString",
        "PyRun_SimpleStringFlags",
        "PyImport_ImportModule",
        "PyObject_GetAttr",
        "PyType_Ready",
        "PyLong_FromLong",
        "PyUnicode_FromString",
        "PyErr_SetString",
        "_PyRuntime",
        "_Py_Dealloc",
        "_Py_NoneStruct",
        "_Py_TrueStruct",
    }
)
STATIC_PYTHON_MIN = 20  # this many C-API definitions also mean an interpreter inside
_PY_PUBLIC = re.compile(r"^Py([A-Za-z]+)_")


def is_python_api(symbol: str) -> bool:
    """``Py_Initialize``, ``_Py_Dealloc``, ``PyObject_GetAttr``: yes; ``PyImaging_New``: no."""
    if symbol.startswith(("Py_", "_Py")):
        return True
    match = _PY_PUBLIC.match(symbol)
    return match is not None and match.group(1) in PYTHON_API_FAMILIES


# ---------------------------------------------------------------------------------------------
# manylinux / musllinux: auditwheel's policies and its verdict, mirrored.

LIBPYTHON_RE = re.compile(r"^libpython\d+\.\d+m?.so(\.\d)*$")
_ORIGIN_RE = re.compile(r"\$(ORIGIN|\{ORIGIN\})")
_WHEEL_ROOT = "/\0wheel"
_MAX_DEPTH = 256


@functools.lru_cache(maxsize=8)
def manylinux_policies(libc: str, arch: str) -> Any:
    """auditwheel's ``WheelPolicies`` for ``libc`` (glibc/musl) and a baseline architecture."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    return WheelPolicies(libc=Libc(libc), arch=Architecture(arch), musl_policy=None)


def host_library_dirs(libc: str = "glibc") -> tuple[str, ...]:
    """Where auditwheel (and so this audit) looks for system libraries: no ld.so.cache."""
    env, conf = _host_search(libc)
    return tuple(dict.fromkeys([*env, *conf]))


def _host_search(libc: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """auditwheel's ``load_ld_paths``: $LD_LIBRARY_PATH-like dirs, then ld.so.conf and /lib..."""
    from auditwheel.lddtree import load_ld_paths
    from auditwheel.libc import Libc

    paths = load_ld_paths(Libc(libc))
    return tuple(paths["env"]), tuple(paths["conf"])


@dataclass(frozen=True)
class TagVerdict:
    """The most compatible platform tag the ELF files allow, and why not a better one."""

    tag: str | None
    libc: str | None
    arch: str | None
    priorities: Mapping[str, int]
    reasons: tuple[str, ...]
    external: tuple[str, ...]
    error: str | None = None

    def allows(self, declared: str) -> bool | None:
        """Whether ``declared`` (a platform tag) claims no more than this verdict; None: unknown."""
        if self.tag is None:
            return None
        if declared.startswith("linux_"):
            return True
        mine, theirs = self.priorities.get(self.tag), self.priorities.get(declared)
        if mine is None or theirs is None:
            return None
        return theirs <= mine


@dataclass(frozen=True)
class _Lib:
    soname: str
    realpath: str | None
    in_wheel: bool
    info: ElfInfo | None
    needed: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tree:
    path: str
    info: ElfInfo
    libc: str | None
    needed: tuple[str, ...]
    libraries: dict[str, _Lib]


@dataclass
class _Search:
    """The ldpaths dict auditwheel threads through one ``ldd`` call tree."""

    env: list[tuple[bool, str]]
    conf: list[tuple[bool, str]]
    interp: list[tuple[bool, str]]
    rpath: list[tuple[bool, str]]
    runpath: list[tuple[bool, str]]


class _Files:
    """The unpacked wheel, as auditwheel would see it on disk, plus the host's libraries."""

    def __init__(self, members: Mapping[str, ElfInfo | None], host: HostLibraries) -> None:
        self.members = members
        self.host = host
        self.dirs = {""}
        for member in members:
            parent = posixpath.dirname(member)
            while parent not in self.dirs:
                self.dirs.add(parent)
                parent = posixpath.dirname(parent)

    def is_dir(self, where: tuple[bool, str]) -> bool:
        in_wheel, path = where
        return path in self.dirs if in_wheel else Path(path).is_dir()

    def lookup(self, where: tuple[bool, str], soname: str) -> tuple[str, bool, ElfInfo] | None:
        in_wheel, path = where
        if in_wheel:
            member = posixpath.join(path, soname) if path else soname
            info = self.members.get(member)
            return (member, True, info) if info is not None else None
        hit = self.host.locate(f"{path.rstrip('/')}/{soname}")
        return (hit[0], False, hit[1]) if hit is not None else None


def _ld_dirs(value: str | None, origin: tuple[bool, str], files: _Files) -> list[tuple[bool, str]]:
    """auditwheel's parse_ld_paths: split, expand $ORIGIN, normalise, keep existing dirs."""
    if not value:
        return []
    out: list[tuple[bool, str]] = []
    in_wheel, origin_dir = origin
    for entry in value.split(":"):
        if entry == "":
            where = (True, "")  # the current directory: auditwheel works in the unpacked wheel
        elif _ORIGIN_RE.search(entry):
            base = f"{_WHEEL_ROOT}/{origin_dir}" if in_wheel else origin_dir
            where = _split_root(posixpath.normpath(_ORIGIN_RE.sub(base, entry)))
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


def _ldd(
    path: str,
    info: ElfInfo,
    files: _Files,
    exclude: Callable[[str], bool],
    search: _Search | None = None,
    all_libs: dict[str, _Lib] | None = None,
    depth: int = 0,
) -> _Tree:
    """auditwheel.lddtree.ldd over in-memory ELF data; ``path`` is a member or a host path."""
    first = all_libs is None
    libs: dict[str, _Lib] = {} if all_libs is None else all_libs
    in_wheel = not path.startswith("/")
    origin = (in_wheel, posixpath.dirname(path))
    rpaths = _ld_dirs(info.rpath, origin, files)
    runpaths = _ld_dirs(info.runpath, origin, files)
    if runpaths:
        rpaths = []
    libc = _tree_libc(info, info.needed, path) if first else None
    if search is None:
        interp: list[tuple[bool, str]] = []
        if info.interpreter:
            interp_path = posixpath.normpath("/" + info.interpreter).replace("//", "/")
            soname = posixpath.basename(interp_path)
            real = os.path.realpath(interp_path)
            libs[soname] = _Lib(soname, real, False, info)
            idir = posixpath.dirname(interp_path)
            interp = [(False, idir), (False, posixpath.normpath("/usr" + idir))]
        env, conf = _host_search(libc or "glibc")
        search = _Search(
            [(False, d) for d in env], [(False, d) for d in conf], interp, rpaths, runpaths
        )
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
        if LIBPYTHON_RE.match(soname) or depth >= _MAX_DEPTH:
            libs[soname] = _Lib(soname, None, False, None)
            continue
        found = _find(files, info, soname, dirs)
        if found is None:
            libs[soname] = _Lib(soname, None, False, None)
            continue
        real, lib_in_wheel, lib_info = found
        libs[soname] = _Lib(soname, real, lib_in_wheel, lib_info)
        dep = _ldd(real, lib_info, files, exclude, search, libs, depth + 1)
        libs[soname] = _Lib(soname, real, lib_in_wheel, lib_info, dep.needed)
    return _Tree(path, info, libc, tuple(needed), libs)


def _find(
    files: _Files, like: ElfInfo, soname: str, dirs: Iterable[tuple[bool, str]]
) -> tuple[str, bool, ElfInfo] | None:
    for where in dirs:
        hit = files.lookup(where, soname)
        if hit is not None and like.is_compatible(hit[2]):
            return hit
    return None


@dataclass
class _Ref:
    """auditwheel's ExternalReference: per policy, libraries to graft and blacklisted symbols."""

    libs: dict[str, str | None]
    blacklist: dict[str, list[str]]
    policy: Any


class _Unsupported(Exception):
    """A wheel auditwheel itself would refuse (or crash on); the message says why."""


def _filter_libs(libs: Iterable[str], whitelist: frozenset[str]) -> Iterable[str]:
    for lib in libs:
        if "ld-linux" in lib or lib in ("ld64.so.2", "ld64.so.1") or lib in whitelist:
            continue
        yield lib


def _external_refs(policies: Any, tree: _Tree) -> dict[str, _Ref]:
    """auditwheel's ``lddtree_external_references`` for one ELF tree."""
    out: dict[str, _Ref] = {}
    for p in policies:
        libs: dict[str, str | None] = {}
        blacklist: dict[str, list[str]] = {}
        if p != policies.linux:
            reduced = {k: p.blacklist[k] for k in set(p.blacklist) & set(tree.needed)}
            blacklist = _blacklisted(tree.info, reduced)
            todo = set(_filter_libs(tree.needed, p.whitelist))
            seen: set[str] = set()
            while todo:
                lib = todo.pop()
                seen.add(lib)
                dep = tree.libraries.get(lib)
                deps = dep.needed if dep is not None else ()
                todo |= {d for d in _filter_libs(deps, p.whitelist) if d not in seen}
            for lib in seen:
                dep = tree.libraries.get(lib)
                if dep is None or not dep.in_wheel:
                    libs[lib] = dep.realpath if dep is not None else None
        out[p.name] = _Ref(libs, blacklist, p)
    return out


def _blacklisted(info: ElfInfo, symbols: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    if not symbols:
        return {}
    undefined = {"*", *info.undefined}
    return {lib: sorted(syms & undefined) for lib, syms in symbols.items() if syms & undefined}


def _py_extension(path: str, info: ElfInfo) -> int | None:
    """auditwheel's elf_is_python_extension: 3 for PyInit_<mod>, 2 for the old entry points."""
    if not info.has_symbols:
        return None
    mod = posixpath.basename(path).split(".", 1)[0]
    if f"PyInit_{mod}" in info.entry_points:
        return 3
    if f"init{mod}" in info.entry_points or f"_cffi_pypyinit_{mod}" in info.entry_points:
        return 2
    return None


def _fixup(py: Mapping[str, _Tree], nonpy: dict[str, _Tree]) -> None:
    """auditwheel's _fixup_elf_trees: borrow resolutions from a fully resolved tree."""
    resolved = [
        t
        for t in (*py.values(), *nonpy.values())
        if all(lib.realpath is not None for lib in t.libraries.values())
    ]
    for path, tree in list(nonpy.items()):
        if all(lib.realpath is not None for lib in tree.libraries.values()):
            continue
        ref = next(
            (
                c
                for c in resolved
                for lib in c.libraries.values()
                if lib.in_wheel and lib.realpath == path
            ),
            None,
        )
        if ref is None:
            continue
        new: dict[str, _Lib] = {}
        known = set(tree.libraries)
        for soname, lib in tree.libraries.items():
            if lib.realpath is None and soname in ref.libraries:
                new[soname] = ref.libraries[soname]
                pending = set(new[soname].needed) - known
                while pending:
                    known |= pending
                    for name in list(pending):
                        if name in ref.libraries:
                            new[name] = ref.libraries[name]
                            pending |= set(new[name].needed)
                    pending -= known
            else:
                new[soname] = lib
        nonpy[path] = _Tree(tree.path, tree.info, tree.libc, tree.needed, new)


@dataclass
class _ElfData:
    policies: Any
    arch: str
    full: dict[str, _Tree]
    refs: dict[str, dict[str, _Ref]]
    versioned: dict[str, set[str]]
    ucs2: bool
    pyfpe: bool


def wheel_platform(wheel_name: str) -> tuple[str | None, str | None, bool]:
    """(baseline arch, libc, pure) from the file name, as auditwheel's wheeltools reads them."""
    from auditwheel.architecture import Architecture

    try:
        _, _, _, tags = parse_wheel_filename(wheel_name)
    except InvalidWheelFilename:
        return None, None, False
    platforms = sorted({t.platform for t in tags})
    archs: set[str] = set()
    missed, pure = False, True
    for plat in platforms:
        pure = pure and plat == "any"
        if plat == "any":
            missed = True
            continue
        hits = {a.baseline.value for a in Architecture if plat.endswith(f"_{a.value}")}
        archs |= hits
        missed = missed or not hits
    arch = archs.pop() if len(archs) == 1 and not missed else None
    libcs = {
        libc
        for plat in platforms
        for prefix, libc in (("manylinux", "glibc"), ("musllinux", "musl"), ("android", "android"))
        if plat.startswith(prefix)
    }
    return arch, (libcs.pop() if len(libcs) == 1 else None), pure and not archs


class _Collector:
    """auditwheel's get_wheel_elfdata, one file at a time."""

    def __init__(self, wheel_name: str, files: _Files, exclude: Callable[[str], bool]) -> None:
        self.arch, self.libc, self.pure = wheel_platform(wheel_name)
        if self.libc == "android":
            raise _Unsupported("Android wheels are not audited here")
        self.files, self.exclude = files, exclude
        self.policies: Any = None
        self.py: dict[str, _Tree] = {}
        self.nonpy: dict[str, _Tree] = {}
        self.refs: dict[str, dict[str, _Ref]] = {}
        self.versioned: dict[str, set[str]] = {}
        self.ucs2 = self.pyfpe = self.platform_wheel = False
        self.purelib: list[str] = []

    def visit(self, path: str, info: ElfInfo) -> None:
        if "purelib" in path.split("/")[:-1]:
            self.purelib.append(posixpath.basename(path))
        if self.purelib:
            return
        tree = _ldd(path, info, self.files, self.exclude)
        if info.arch is None or (self.arch is not None and info.arch != self.arch):
            return
        self.arch = self.arch or info.arch
        if tree.libc is not None:
            if self.libc is not None and self.libc != tree.libc:
                return
            self.libc = tree.libc
        if self.policies is None and self.libc is not None:
            self.policies = _policies_for(self.libc, self.arch)
        self.platform_wheel = True
        _add_version_needs(self.versioned, info)
        kind = _py_extension(path, info)
        if kind is None:
            self.nonpy[path] = tree
            return
        if self.policies is None:
            raise _Unsupported(f"cannot tell the libc of the Python extension {path}")
        self.py[path] = tree
        self.pyfpe |= info.uses_pyfpe
        self.ucs2 |= kind == 2 and info.uses_ucs2
        self.refs[path] = _external_refs(self.policies, tree)

    def finish(self) -> _ElfData:
        if self.purelib:
            raise _Unsupported("shared libraries in purelib: " + ", ".join(self.purelib))
        if not self.platform_wheel or self.arch is None:
            raise _Unsupported(
                "pure wheel: no ELF file"
                if self.pure
                else "no ELF file for the wheel's architecture"
            )
        _fixup(self.py, self.nonpy)
        needed = {lib for t in (*self.py.values(), *self.nonpy.values()) for lib in t.needed}
        policies = self.policies or _policies_for(_host_libc(), self.arch)
        full = dict(self.py)
        for path, tree in self.nonpy.items():
            if posixpath.basename(path) not in needed:
                full[path] = tree
            self.refs[path] = _external_refs(policies, tree)
        return _ElfData(policies, self.arch, full, self.refs, self.versioned, self.ucs2, self.pyfpe)


def _collect(
    wheel_name: str,
    members: Mapping[str, ElfInfo | None],
    order: Sequence[str],
    files: _Files,
    exclude: Callable[[str], bool],
) -> _ElfData:
    collector = _Collector(wheel_name, files, exclude)
    for path in order:
        info = members.get(path)
        if not path.endswith(".py") and info is not None:
            collector.visit(path, info)
    return collector.finish()


def _policies_for(libc: str, arch: str) -> Any:
    """:func:`manylinux_policies`, a pair auditwheel has none for raising :class:`_Unsupported`."""
    try:
        return manylinux_policies(libc, arch)
    except (ValueError, KeyError, IndexError) as exc:  # e.g. musl on big-endian ppc64
        raise _Unsupported(f"auditwheel has no policies for {libc} on {arch}: {exc}") from None


def _add_version_needs(into: dict[str, set[str]], info: ElfInfo) -> None:
    """auditwheel's versioned-symbol requirements of one ELF, the dynamic loader's left out."""
    for need in info.version_needs:
        if not (need.file.startswith("ld-linux") or need.file in ("ld64.so.2", "ld64.so.1")):
            into.setdefault(need.file, set()).update(need.versions)


def _host_libc() -> str:
    from auditwheel.libc import Libc

    return str(Libc.detect().value)


def _machine_policy(data: _ElfData, external_sonames: frozenset[str]) -> Any:
    """auditwheel's _get_machine_policy: ISA extensions beyond the wheel's architecture."""
    from auditwheel.architecture import Architecture

    policies = data.policies
    result = policies.highest
    checks: dict[str, tuple[str | None, ElfInfo]] = {}
    for path, tree in data.full.items():
        checks.setdefault(path, (None, tree.info))
        for dep in tree.libraries.values():
            if dep.soname in external_sonames and dep.realpath is not None and dep.info:
                checks.setdefault(dep.realpath, (dep.soname, dep.info))
    for path, (soname, info) in checks.items():
        if info.isa_error:
            raise _Unsupported(f"{path}: unknown x86_64 ISA level in its GNU property note")
        if info.isa_ext is None or policies.architecture.is_superset(Architecture(info.isa_ext)):
            continue
        if soname is not None:
            found = max((p for p in policies if soname in p.whitelist), default=policies.linux)
            if policies.linux.priority < found.priority:
                result = min(result, found)
                continue
        result = policies.linux
    return result


def platform_verdict(
    wheel_name: str,
    members: Mapping[str, ElfInfo | None],
    order: Sequence[str],
    host: HostLibraries,
    exclude: Callable[[str], bool] = lambda _: False,
) -> TagVerdict:
    """The platform tag ``auditwheel show`` would give (``exclude`` as its ``--exclude``).

    ``members`` maps every file of the wheel to its ELF data (None: not an ELF file); ``order``
    is the RECORD order, in which auditwheel visits files.
    """
    files = _Files(members, host)
    try:
        data = _collect(wheel_name, members, order, files, exclude)
        return _analyze(data, host)
    except _Unsupported as exc:
        arch, libc, _ = wheel_platform(wheel_name)
        return TagVerdict(None, libc, arch, {}, (), (), error=str(exc))


def _analyze(data: _ElfData, host: HostLibraries) -> TagVerdict:
    """auditwheel's analyze_wheel_abi with allow_graft=False, as ``show`` runs it."""
    policies = data.policies
    refs = {p.name: _Ref({}, {}, p) for p in policies}
    for path in data.full:
        for name, ref in data.refs[path].items():
            for lib, syms in ref.blacklist.items():
                refs[name].blacklist[lib] = sorted({*refs[name].blacklist.get(lib, ()), *syms})
            refs[name].libs.update(ref.libs)
    external: dict[str, str] = {}
    for ref in refs.values():
        if ref.policy.priority:
            for lib, real in ref.libs.items():
                if real:
                    external.setdefault(real, lib)
    symbol_policy = _symbol_policy(policies, data.versioned, refs, external, host)
    ref_policy = max((r.policy for r in refs.values() if not r.libs), default=policies.linux)
    black_policy = max((r.policy for r in refs.values() if not r.blacklist), default=policies.linux)
    machine = _machine_policy(data, frozenset(external.values()))
    ucs = policies.linux if data.ucs2 else policies.highest
    pyfpe = policies.linux if data.pyfpe else policies.highest
    overall = min(symbol_policy, ucs, pyfpe, black_policy, machine, ref_policy)
    reasons = _reasons(data, refs, symbol_policy, black_policy, machine, ucs, pyfpe)
    priorities = {name: p.priority for p in policies for name in (p.name, *p.aliases)}
    libc = "musl" if policies.libc.value == "musl" else "glibc"
    return TagVerdict(
        overall.name,
        libc,
        data.arch,
        MappingProxyType(priorities),
        tuple(reasons),
        tuple(sorted(refs[policies.highest.name].libs)),
    )


def _symbol_policy(
    policies: Any,
    versioned: Mapping[str, set[str]],
    refs: Mapping[str, _Ref],
    external: Mapping[str, str],
    host: HostLibraries,
) -> Any:
    ext_versions: dict[str, dict[str, set[str]]] = {}
    for real, soname in external.items():
        info = host.read(real)
        if info is None:
            continue
        per: dict[str, set[str]] = {}
        _add_version_needs(per, info)
        ext_versions[soname] = per
    candidates = []
    for ref in refs.values():
        if not ref.policy.priority:
            continue
        merged = {k: set(v) for k, v in versioned.items()}
        for soname in ref.libs:
            for k, v in ext_versions.get(soname, {}).items():
                merged.setdefault(k, set()).update(v)
        candidates.append(min(ref.policy, policies.versioned_symbols_policy(merged)))
    return max(candidates, default=policies.versioned_symbols_policy(dict(versioned)))


def _reasons(
    data: _ElfData,
    refs: Mapping[str, _Ref],
    symbol_policy: Any,
    black_policy: Any,
    machine: Any,
    ucs: Any,
    pyfpe: Any,
) -> list[str]:
    policies = data.policies
    top = policies.highest
    out: list[str] = []
    libs = refs[top.name].libs
    if libs:
        out.append(
            "needs libraries neither in the wheel nor whitelisted: " + ", ".join(sorted(libs))
        )
    if symbol_policy < top:
        better = min((p for p in policies if p > symbol_policy), default=top)
        beyond = sorted(
            v
            for vs in data.versioned.values()
            for v in vs
            if v.partition("_")[0] in better.symbol_versions
            and v.partition("_")[2] not in better.symbol_versions[v.partition("_")[0]]
        )
        out.append(
            f"symbol versions {', '.join(beyond) or '(of external libraries)'} "
            f"allow at most {symbol_policy.name}"
        )
    if black_policy < top:
        bad = sorted(
            {
                f"{lib}: {s}"
                for r in refs.values()
                for lib, syms in r.blacklist.items()
                for s in syms
            }
        )
        out.append("uses blacklisted symbols " + "; ".join(bad[:8]))
    if machine < top:
        out.append(f"needs instruction-set extensions beyond {data.arch}")
    if ucs < top:
        out.append("built for a narrow-unicode (UCS2) Python")
    if pyfpe < top:
        out.append("references PyFPE_jbuf")
    return out
