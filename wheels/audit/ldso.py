"""The ld.so model: where each DT_NEEDED entry of a wheel's ELF files resolves, as the dynamic
loader resolves it once the wheel is installed.

Each RUNPATH/RPATH entry is judged and kept when it stays inside site-packages; each root (an
extension module, an executable, a library no other loads) is loaded breadth first like ld.so,
a name already loaded (by its SONAME) not searched again, each need resolved into the wheel,
into another distribution (which must be a Requires-Dist), to a manylinux system library or to
a library the vendor expects on the machine (:mod:`wheels.policy`).
"""

from __future__ import annotations

import posixpath
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wheels.audit.findings import Findings
from wheels.audit.musl import is_musl_self
from wheels.audit_report import Need, shorten
from wheels.elf import ElfInfo, HostLibraries
from wheels.filename import canonicalize_name
from wheels.loading import site_dirs, substitute_origin
from wheels.naming import bare_module, extension_parts
from wheels.policy import VendorPolicy
from wheels.policy.python_api import PYTHON_PREFIXES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from packaging.markers import Marker

    from wheels.audit.requires import Requires
    from wheels.audit.suppliers import Suppliers
    from wheels.audit_report import ElfKind

_SITE = "/\0site-packages"


@dataclass
class Elves:
    """Everything the per-ELF checks need about the wheel."""

    policy: VendorPolicy
    elfs: dict[str, ElfInfo]
    install_of: dict[str, str | None]
    installed: dict[str, str]
    requires: Mapping[str, list[Requires]]
    whitelist: frozenset[str]
    host: HostLibraries
    arch: str | None
    libc: str = "glibc"  # the wheel's: musl's loader answers some names with itself
    site_dirs: tuple[Path, ...] | None = None  # None: this host's, found when first needed
    needs: dict[str, tuple[Need, ...]] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)
    rpath_dirs: dict[str, list[str]] = field(default_factory=dict)
    runpath_dirs: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    definers: dict[tuple[str, str], ElfInfo] = field(default_factory=dict)
    # ELF files whose undefined symbols only musl's C library could define, absent here.
    musl_unchecked: dict[str, int] = field(default_factory=dict)
    # By the providers of a scope (their ids): symbols none of them defines.
    absent: dict[frozenset[int], set[tuple[str, str]]] = field(default_factory=dict)
    supplied: Suppliers | None = None  # see suppliers()

    def suppliers(self) -> Suppliers:
        """The distributions installed here (:mod:`wheels.audit.suppliers`), read once: only
        for a wheel with a need that nothing else supplies."""
        if self.supplied is None:
            from wheels.audit.suppliers import Suppliers

            self.supplied = Suppliers(self.sites())
        return self.supplied

    def sites(self) -> tuple[Path, ...]:
        """Where other distributions are installed (:func:`wheels.loading.site_dirs` unless
        given): looked up only for a wheel that needs another distribution's library."""
        if self.site_dirs is None:
            self.site_dirs = site_dirs()
        return self.site_dirs


def elf_kind(ctx: Elves, member: str, info: ElfInfo) -> ElfKind:
    """Extension module, executable or library, as the report names it."""
    if member in ctx.extensions:
        return "extension"
    return "executable" if info.elf_type == 2 or info.interpreter else "library"


def extension_module(
    install: str | None, installed: Mapping[str, str], info: ElfInfo | None = None
) -> str | None:
    """The module name of an extension installed at ``install``; None for a library.

    A bare ``NAME.so`` is a module when Python can import it: in a package (an ``__init__.py``
    beside it), or in a namespace package (PEP 420: every directory a Python identifier, no
    ``__init__.py`` needed) when the ELF exports ``PyInit_NAME``, as ``jaxlib/cpu/_lapack.so``
    does, imported as ``jaxlib.cpu._lapack``."""
    if install is None:
        return None
    directory, base = posixpath.split(install)
    if named := extension_parts(base):
        return named[0]
    module = bare_module(base)
    if module is None:
        return None
    in_package = not directory or posixpath.join(directory, "__init__.py") in installed
    if in_package and not module.startswith("lib"):
        return module
    importable = all(part.isidentifier() for part in directory.split("/") if directory)
    if importable and info is not None and f"PyInit_{module}" in info.entry_points:
        return module
    return None


def uses_python(info: ElfInfo) -> bool:
    """Does the ELF export a ``PyInit_`` entry point or reference the interpreter's C API?"""
    return any(e.startswith("PyInit_") for e in info.entry_points) or any(
        name.startswith(PYTHON_PREFIXES) for name in (*info.undefined, *info.undefined_weak)
    )


def classify_extensions(ctx: Elves, f: Findings) -> None:
    """Fill ``ctx.extensions``: each ELF named like an extension module that is one.

    A file named like an abi3 or versioned extension that neither exports a ``PyInit_`` nor
    uses the C API is a plain library (pycryptodome's ``_ARC4.abi3.so``, opened through
    ctypes or cffi): nobody imports it, so it needs no entry point and is no extension root,
    as auditwheel (which goes by the entry point) also has it.
    """
    for member, info in ctx.elfs.items():
        module = extension_module(ctx.install_of.get(member), ctx.installed, info)
        if module is None:
            continue
        if uses_python(info):
            ctx.extensions[member] = module
        else:
            f.warning(
                "not-an-extension",
                member,
                f"named like the extension module {module!r} but exports no PyInit_ and uses "
                "no Python C API: a plain library (loaded through ctypes or cffi?)",
            )


def path_tokens(entry: str) -> list[str]:
    """The ``$NAME`` and ``${NAME}`` tokens of a search path entry, by name (braces left out)."""
    return [token.strip("{}") for token in _TOKEN.findall(entry)]


_TOKEN = re.compile(r"\$(\{[A-Za-z_]+\}|[A-Za-z_]+)")


def runpath_dir(entry: str, origin: str | None) -> tuple[str | None, str | None]:
    """(site-packages-relative dir, problem) for one RUNPATH/RPATH entry."""
    if entry == "":
        return None, "an empty entry, which means the current directory"
    tokens = path_tokens(entry)
    if any(t != "ORIGIN" for t in tokens):
        return None, f"'{entry}' uses a token this audit cannot evaluate"
    if tokens:
        if origin is None:
            return None, None
        site_origin = f"{_SITE}/{origin}".rstrip("/")
        expanded = posixpath.normpath(substitute_origin(entry, site_origin))
        if expanded == _SITE:
            return "", None
        if expanded.startswith(_SITE + "/"):
            return expanded[len(_SITE) + 1 :], None
        return None, f"'{entry}' leads out of site-packages"
    if entry.startswith("/"):
        return (
            None,
            f"'{entry}' is an absolute path outside the wheel (a build or toolkit directory?)",
        )
    return None, f"'{entry}' is relative to the current directory"


_DEEP = "/" + "\0/" * 64 + "\0site-packages"  # site-packages, far enough from the root


def outside_dir(entry: str, origin: str | None) -> str | None:
    """Where an entry that leaves the install tree leads: itself when it is absolute, the
    path from site-packages (``../jaxlib``) for an ``$ORIGIN`` one; None for any other."""
    tokens = path_tokens(entry)
    if not tokens:
        return entry if entry.startswith("/") else None
    if origin is None or any(t != "ORIGIN" for t in tokens):
        return None
    site_origin = f"{_DEEP}/{origin}".rstrip("/")
    expanded = posixpath.normpath(substitute_origin(entry, site_origin))
    if expanded == _DEEP or expanded.startswith(_DEEP + "/"):
        return None
    return posixpath.relpath(expanded, _DEEP)


def check_runpaths(ctx: Elves, member: str, info: ElfInfo, f: Findings) -> None:
    """Judge every RUNPATH/RPATH entry that stays in the install tree, or cannot be evaluated,
    once, and keep the directories inside site-packages; one that leaves it is judged by the
    order the loader searches it in (:mod:`wheels.audit.runpaths`)."""
    install = ctx.install_of.get(member)
    origin = posixpath.dirname(install) if install is not None else None
    for which in ("runpath", "rpath"):
        dirs: list[str] = []
        for entry in info.split_path(which):
            where, problem = runpath_dir(entry, origin)
            if problem and outside_dir(entry, origin) is None:
                f.violation("runpath", member, f"{which.upper()} {problem}")
            elif where is not None and where not in dirs:
                dirs.append(where)
        if which == "rpath":
            ctx.rpath_dirs[member] = dirs
        elif info.runpath is not None:
            ctx.runpath_dirs[member] = dirs


def _context_dirs(ctx: Elves, member: str, chain: Sequence[str]) -> list[str]:
    """glibc's order: the object's RUNPATH alone, else the RPATHs of it and of its loaders."""
    own = ctx.runpath_dirs.get(member)
    if own is not None:
        return own
    dirs: list[str] = []
    for loader in reversed(chain):
        dirs += [d for d in ctx.rpath_dirs.get(loader, ()) if d not in dirs]
    return dirs


def _requires_covers(ctx: Elves, distribution: str, arch: str | None) -> bool:
    env = {"extra": "", "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
    if arch:
        env["platform_machine"] = arch
    for req in ctx.requires.get(canonicalize_name(distribution), []):
        marker: Marker | None = req.parsed().marker
        try:
            if marker is None or marker.evaluate(env):
                return True
        except Exception:  # packaging raises several types on odd markers; not covered then
            continue
    return False


@dataclass(frozen=True)
class _Problem:
    """A finding about one need, before it is known in which contexts it occurs."""

    code: str
    message: str


_Resolved = tuple[Need, "_Problem | None"]


def _resolve_one(
    ctx: Elves, member: str, info: ElfInfo, soname: str, dirs: Sequence[str]
) -> _Resolved:
    """Where one DT_NEEDED entry goes from ``dirs``, in the order the audit requires."""
    if soname.startswith("libpython"):  # (every LIBPYTHON_RE name, and any other)
        return Need(soname, "libpython", None), _Problem(
            "libpython",
            f"DT_NEEDED {soname}: extensions must take Python's symbols from the "
            "running interpreter, not link libpython",
        )
    if "/" in soname:
        return Need(soname, "missing", None), _Problem(
            "needed-path", f"DT_NEEDED {soname!r} is a path"
        )
    for d in dirs:
        found = ctx.installed.get(posixpath.join(d, soname) if d else soname)
        lib = ctx.elfs.get(found) if found else None
        if found and lib is not None and info.is_compatible(lib):
            return Need(soname, "wheel", found), None
    supplied = ctx.policy.supplier(soname)
    if supplied is not None:
        return _from_distribution(ctx, soname, supplied.distribution, supplied.dir, dirs)
    if _system(ctx, soname):
        return Need(soname, "system", _host_path(ctx, soname, info)), None
    if ctx.policy.is_external(soname):
        return Need(soname, "external", _host_path(ctx, soname, info)), None
    declared = [d for d in ctx.requires if _requires_covers(ctx, d, ctx.arch)]
    supplier = ctx.suppliers().find(soname, dirs, declared) if declared and dirs else None
    if supplier is not None:
        return Need(soname, "distribution", supplier.where()), None
    elsewhere = sorted(m for m in ctx.elfs if posixpath.basename(m) == soname)
    hint = (
        f"; the wheel has {', '.join(elsewhere)} but no RUNPATH/RPATH entry reaches it"
        if elsewhere
        else _not_installed(ctx, dirs, declared)
    )
    return Need(soname, "missing", None), _Problem(
        "unresolved",
        f"needs {soname}: not in the wheel, not supplied by a declared distribution"
        f"{' installed here' if declared else ''}, not a "
        f"{'musllinux' if ctx.libc == 'musl' else 'manylinux'} system library and not expected "
        f"from the {ctx.policy.name} vendor's machine{hint}",
    )


def _not_installed(ctx: Elves, dirs: Sequence[str], declared: Sequence[str]) -> str:
    """Where the search reaches a directory the wheel installs nothing in, and some declared
    distribution is not installed here to say whether it does: a hint naming them."""
    own = {posixpath.dirname(p) for p in ctx.installed}
    foreign = [d for d in dirs if d not in own]
    absent = ctx.suppliers().missing(declared) if foreign and declared else []
    if not absent:
        return ""
    return (
        f"; its search reaches {', '.join(foreign)}, where the wheel installs nothing, and "
        f"{', '.join(absent)} (declared, not installed here) may install it there: install "
        "them to check"
    )


def _system(ctx: Elves, soname: str) -> bool:
    """A library every system of the wheel's platform tag has: its policies' whitelist, the
    loader, and for musl every name musl's loader answers with the C library itself."""
    if ctx.libc == "musl":
        return soname in ctx.whitelist or is_musl_self(soname)
    return soname in ctx.whitelist or "ld-linux" in soname or soname in ("ld64.so.1", "ld64.so.2")


def _from_distribution(
    ctx: Elves, soname: str, dist: str, where: str, dirs: Sequence[str]
) -> _Resolved:
    if where not in dirs:
        return Need(soname, "missing", None), _Problem(
            "unresolved",
            f"needs {soname}, which {dist} installs in {where}, but no "
            "RUNPATH/RPATH entry reaches that directory",
        )
    need = Need(soname, "distribution", f"{dist}: {posixpath.join(where, soname)}")
    if not _requires_covers(ctx, dist, ctx.arch):
        return need, _Problem(
            "requires-dist",
            f"needs {soname} from {dist} ({where}), but {dist} is not in Requires-Dist",
        )
    return need, None


@dataclass
class Group:
    """What loading one root (an extension, an executable, a library) brings in, as ld.so does."""

    members: list[str]
    outside: list[tuple[Need, str]]  # a need from outside the wheel, and the member needing it
    resolved: dict[tuple[str, str], _Resolved]


def _load(ctx: Elves, root: str) -> Group:
    """Breadth-first like ld.so: a name already loaded (by its SONAME) is not searched again.
    A search that found nothing loaded nothing: the next object that needs the name searches
    its own directories, so each object is judged by its own RUNPATH (ld.so would stop at the
    first failure, and blaming the others for it would name the wrong file)."""
    info = ctx.elfs[root]
    loaded: dict[str, _Resolved] = {}
    for name in {info.soname, posixpath.basename(root)} - {None}:
        loaded[str(name)] = (Need(str(name), "wheel", root), None)
    group = Group([root], [], {})
    chains: dict[str, tuple[str, ...]] = {root: (root,)}
    queue = deque([root])
    while queue:
        member = queue.popleft()
        mine = ctx.elfs[member]
        dirs = _context_dirs(ctx, member, chains[member])
        for soname in mine.needed:
            resolved = loaded.get(soname)
            if resolved is None:
                resolved = _resolve_one(ctx, member, mine, soname, dirs)
                need = resolved[0]
                if need.kind != "missing":
                    loaded[soname] = resolved
                if need.kind == "wheel" and need.where and need.where not in chains:
                    chains[need.where] = (*chains[member], need.where)
                    group.members.append(need.where)
                    queue.append(need.where)
                    lib_soname = ctx.elfs[need.where].soname
                    if lib_soname:
                        loaded.setdefault(lib_soname, resolved)
                elif need.kind != "wheel":
                    group.outside.append((need, member))
            group.resolved[(member, soname)] = resolved
    return group


def own_roots(ctx: Elves) -> list[str]:
    """The ELFs loaded on their own: every extension module and executable, sorted."""
    return [
        m
        for m in sorted(ctx.elfs)
        if m in ctx.extensions or elf_kind(ctx, m, ctx.elfs[m]) == "executable"
    ]


_RANK = {"wheel": 0, "distribution": 1, "system": 2, "external": 3, "libpython": 4, "missing": 5}


def resolve_all(ctx: Elves, f: Findings) -> None:
    """Load every root; each ELF's needs as resolved in the contexts it is loaded in."""
    roots = own_roots(ctx)
    is_root = set(roots)
    seen: set[str] = set()
    results: dict[tuple[str, str], dict[str, _Resolved]] = {}
    for root in [*roots, *sorted(ctx.elfs)]:
        # Every extension and executable is loaded on its own, as Python imports each module
        # by itself (auditwheel's get_wheel_elfdata likewise makes each one a tree of its own),
        # even when loading another root also brings it in; a library only if no root did.
        if root in ctx.groups or (root in seen and root not in is_root):
            continue
        group = _load(ctx, root)
        ctx.groups[root] = group
        seen.update(group.members)
        for key, value in group.resolved.items():
            results.setdefault(key, {})[root] = value
    for member, info in ctx.elfs.items():
        ctx.needs[member] = tuple(
            min(
                (n for n, _ in results.get((member, s), {}).values()),
                key=lambda n: _RANK[n.kind],
                default=Need(s, "missing", None),
            )
            for s in info.needed
        )
    for (member, _soname), by_root in sorted(results.items()):
        problems: dict[_Problem, list[str]] = {}
        for root, (_, problem) in by_root.items():
            if problem is not None:
                problems.setdefault(problem, []).append(root)
        for problem, where in problems.items():
            context = "" if member in where else f" (when loaded by {shorten(where, 3)})"
            f.violation(problem.code, member, problem.message + context)


def _host_path(ctx: Elves, soname: str, like: ElfInfo) -> str | None:
    hit = ctx.host.find(soname, like)
    return hit[0] if hit else None
