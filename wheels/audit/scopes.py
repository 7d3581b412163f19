"""What each ELF file finds loaded beside it: load scopes, stranded needs and symbol closure.

A group's scope is what a dlopen of its root puts in the local scope, host libraries included;
a need of another distribution's library that only the wheel can make it find is stranded
(:mod:`wheels.loading`); every undefined, non-weak symbol must be defined by something loaded
with the ELF.
"""

from __future__ import annotations

import ast
import posixpath
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wheels.audit.archive import Archive, read_member
from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves, Group
from wheels.audit.musl import is_musl_self
from wheels.audit.raw import MemberError
from wheels.audit_report import Need, SymbolCheck, plural, shorten
from wheels.elf import ElfInfo
from wheels.loading import installed_copy, search_path, stranded_needs
from wheels.policy import DistLib
from wheels.policy.python_api import PYTHON_PREFIXES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

LISTED_SYMBOLS = 200


@dataclass(frozen=True)
class _Stranded:
    """A need of another distribution's library that ld.so will not find (:mod:`wheels.loading`)."""

    member: str  # the wheel's ELF that loads the library
    library: str  # the other distribution's library (its name as needed)
    soname: str
    lib: DistLib


@dataclass
class Scope:
    """What an ELF file finds loaded beside it, and what could not be read to tell."""

    providers: list[ElfInfo]
    unverifiable: list[str]
    stranded: list[_Stranded] = field(default_factory=list)


def _group_scope(ctx: Elves, group: Group) -> Scope:
    """The objects a dlopen of the group's root puts in its local scope, host ones included.

    Like ld.so, a name already loaded (the wheel's libraries and their direct needs) is not
    searched again; any other need of a library from outside is searched through that library's
    own RUNPATH and the host's directories.
    """
    scope = Scope([ctx.elfs[m] for m in group.members], [])
    loaded = {ctx.elfs[m].soname or posixpath.basename(m) for m in group.members}
    loaded.update(need.soname for need, _ in group.outside)
    seen: set[str] = set()
    queue = deque(
        (*_outside_node(ctx, need, ctx.elfs[member]), member) for need, member in group.outside
    )
    while queue:
        key, info, label, member = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        if info is None:
            scope.unverifiable.append(label)
            continue
        scope.providers.append(info)
        supplied = ctx.policy.distributions
        stranded = (
            dict(stranded_needs(key, info, supplied, ctx.sites(), loaded))
            if any(n in supplied for n in info.needed)
            else {}
        )
        for soname in info.needed:
            if soname in loaded:
                continue
            loaded.add(soname)
            if soname in stranded:
                # ld.so would not find it; loaded first (as the fix does), it is this copy
                scope.stranded.append(_Stranded(member, label, soname, stranded[soname]))
                hit = installed_copy(stranded[soname], soname, ctx.sites(), ctx.host)
            else:
                hit = ctx.host.find(soname, info, search_path(key, info))
            node = (hit[0], hit[1], soname) if hit else (f"none:{soname}", None, soname)
            queue.append((*node, member))
    return scope


def _outside_node(ctx: Elves, need: Need, like: ElfInfo) -> tuple[str, ElfInfo | None, str]:
    if need.kind == "distribution":
        lib = ctx.policy.supplier(need.soname)
        hit = installed_copy(lib, need.soname, ctx.sites(), ctx.host) if lib else None
        if lib is None and need.where and ": " in need.where:  # (wheels.audit.suppliers)
            path = need.where.split(": ", 1)[1]
            hit = next((h for d in ctx.sites() if (h := ctx.host.locate(str(d / path)))), None)
        if hit is not None and like.is_compatible(hit[1]):
            return hit[0], hit[1], need.soname
    elif need.kind in ("system", "external"):
        hit = ctx.host.find(need.soname, like)
        if hit is not None:
            return hit[0], hit[1], need.soname
    return f"none:{need.soname}", None, need.soname


def scopes_by_member(ctx: Elves) -> dict[str, Scope]:
    """Each ELF's scope: a root's (an extension module, an executable, a library nothing loads)
    is that of its own group, since it must load by itself; any other ELF's is the union of the
    groups it is loaded in."""
    group_scopes = {root: _group_scope(ctx, g) for root, g in ctx.groups.items()}
    out: dict[str, Scope] = dict(group_scopes)
    for root, group in ctx.groups.items():
        for member in group.members:
            if member in group_scopes:
                continue
            scope = out.setdefault(member, Scope([], []))
            known = {id(p) for p in scope.providers}
            scope.providers += [p for p in group_scopes[root].providers if id(p) not in known]
            scope.unverifiable += [
                u for u in group_scopes[root].unverifiable if u not in scope.unverifiable
            ]
            scope.stranded += [s for s in group_scopes[root].stranded if s not in scope.stranded]
    return out


def check_stranded(ctx: Elves, archive: Archive, scopes: Mapping[str, Scope], f: Findings) -> None:
    """A finding for each stranded need that the wheel does not load itself."""
    stranded = {s for scope in scopes.values() for s in scope.stranded}
    for s in sorted(stranded, key=lambda s: (s.member, s.library, s.soname)):
        home = posixpath.join(s.lib.dir, s.soname) if s.lib.dir else s.soname
        module = s.lib.module
        if module is None:
            remedy = f"list {s.soname} in the DT_NEEDED of this library"
        else:
            packages = packages_loading(ctx, s.member)
            missing = [p for p in packages if not _imports_first(archive, ctx, p, module)]
            if packages and not missing:
                continue
            where = ", ".join(f"{p or '(top level)'}/__init__.py" for p in missing) or (
                "the package of an extension that loads it"
            )
            remedy = f"import {module} in {where}"
        f.violation(
            "stranded-need",
            s.member,
            f"loads {s.library}, which needs {s.soname} ({s.lib.distribution}: {home}); its own "
            "search path does not reach it and nothing loaded with it loads it, so loading fails "
            f"unless something loaded it before: {remedy}",
        )


def packages_loading(ctx: Elves, member: str) -> list[str]:
    """The install directories of the extension modules whose loading loads ``member``."""
    roots = [r for r, g in ctx.groups.items() if r in ctx.extensions and member in g.members]
    return sorted({posixpath.dirname(ctx.install_of.get(r) or r) for r in roots})


def init_text(archive: Archive, ctx: Elves, package: str) -> bytes:
    """``package``'s ``__init__.py`` in the wheel; empty when there is none or it cannot be read
    (the member scan reports an unreadable member)."""
    init = ctx.installed.get(posixpath.join(package, "__init__.py"))
    if init is None:
        return b""
    try:
        return bytes(read_member(archive, init))
    except (KeyError, MemberError):
        return b""


def _imports_first(archive: Archive, ctx: Elves, package: str, module: str) -> bool:
    """Does ``package``'s ``__init__.py`` import ``module`` at its top level, before any
    relative import (which is how a package loads its extension modules)?"""

    try:
        body = ast.parse(init_text(archive, ctx, package)).body
    except (SyntaxError, ValueError):
        return False
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level:
            return False
        if (isinstance(node, ast.Import) and any(a.name == module for a in node.names)) or (
            isinstance(node, ast.ImportFrom) and node.module == module
        ):
            return True
    return False


def _bound(
    definers: dict[tuple[str, str], ElfInfo],
    symbol: tuple[str, str],
    providers: Sequence[ElfInfo],
    in_scope: frozenset[int],
) -> bool:
    """Is ``symbol`` defined in ``providers``? Remembers who defined it last time: ELFs share
    most of their libraries, so that one is usually in scope again."""
    known = definers.get(symbol)
    if known is not None and id(known) in in_scope:
        return True
    name, version = symbol
    found = next((p for p in providers if p.defines(name, version)), None)
    if found is not None:
        definers[symbol] = found
    return found is not None


# What the interpreter itself has loaded when it imports an extension module: CPython links
# libm (and, before glibc 2.34 merged them into libc, libpthread, libdl and libutil). A fixed
# set, not this host's python's own DT_NEEDED closure (Debian's also links libz and libexpat,
# which a wheel must not count on).
INTERPRETER_LIBRARIES = (
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "libutil.so.1",
)


@dataclass
class _Binding:
    """Where the undefined symbols of one ELF bind."""

    bound: int = 0
    python: int = 0
    unverified: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    interpreter: dict[str, list[str]] = field(default_factory=dict)  # library -> symbols


def _interpreter_libraries(ctx: Elves, like: ElfInfo) -> list[tuple[str, ElfInfo]]:
    """(name, ELF data) of the :data:`INTERPRETER_LIBRARIES` this host has for ``like``."""
    out = []
    for soname in INTERPRETER_LIBRARIES:
        hit = ctx.host.find(soname, like)
        if hit is not None:
            out.append((soname, hit[1]))
    return out


def _bind_all(ctx: Elves, info: ElfInfo, scope: Scope, python_ok: bool) -> _Binding:
    out = _Binding()
    providers = [p for p in scope.providers if p is not info]
    in_scope = frozenset(id(p) for p in providers)
    # What none of these providers defines, known from an ELF with the same scope: extension
    # modules share their libraries, and each leaves the same C API undefined (scipy's 118
    # ELFs: 12,177 references to look up in vain, 1,978 of them different).
    absent = ctx.absent.setdefault(in_scope, set())
    interpreter: list[tuple[str, ElfInfo]] | None = None if python_ok else []
    for symbol in zip(info.undefined, info.undefined_versions, strict=True):
        if symbol not in absent:
            if _bound(ctx.definers, symbol, providers, in_scope):
                out.bound += 1
                continue
            absent.add(symbol)
        name, version = symbol
        if python_ok and name.startswith(PYTHON_PREFIXES):
            out.python += 1
            continue
        label = f"{name}@{version}" if version else name
        if interpreter is None:  # read only when a symbol is not bound otherwise
            interpreter = _interpreter_libraries(ctx, info)
        if by := next((n for n, lib in interpreter if lib.defines(name, version)), None):
            out.python += 1
            out.interpreter.setdefault(by, []).append(label)
        elif scope.unverifiable:
            out.unverified.append(label)
        else:
            out.missing.append(label)
    return out


def _why_unverifiable(ctx: Elves, scope: Scope) -> str:
    """Why the libraries of ``scope`` that could not be read were not: unresolved, or absent."""
    unresolved = {n.soname for needs in ctx.needs.values() for n in needs if n.kind == "missing"}
    names = sorted(set(scope.unverifiable))
    musl = [n for n in names if ctx.libc == "musl" and is_musl_self(n)]
    parts = [
        ", ".join(n for n in names if n in unresolved) + " unresolved",
        ", ".join(n for n in names if n not in unresolved and n not in musl)
        + " not readable on this host",
        ", ".join(musl) + " is musl's C library, which this glibc host does not have",
    ]
    return "; ".join(p for p in parts if not p.startswith(" "))


def _only_musl(ctx: Elves, scope: Scope) -> bool:
    return ctx.libc == "musl" and all(is_musl_self(n) for n in scope.unverifiable)


def check_symbols(
    ctx: Elves, member: str, scope: Scope, python_ok: bool, f: Findings
) -> SymbolCheck:
    """Every undefined, non-weak symbol of ``member`` against its scope; in an ELF loaded into
    Python, the C API and what the interpreter's own libraries define bind in the interpreter."""
    info = ctx.elfs[member]
    b = _bind_all(ctx, info, scope, python_ok)
    if b.missing:
        f.violation(
            "undefined-symbol",
            member,
            f"{plural(len(b.missing), 'undefined symbol')} "
            f"defined by none of the libraries loaded with it: {shorten(b.missing)}",
        )
    for library, names in sorted(b.interpreter.items()):
        f.warning(
            "interpreter-symbols",
            member,
            f"binds {shorten(names, 4)} from {library} only because the interpreter loaded it; "
            f"{library} is not in its DT_NEEDED (link with -l{library[3:].split('.')[0]})",
        )
    if b.unverified and _only_musl(ctx, scope):  # said once for the wheel (check_elfs)
        ctx.musl_unchecked[member] = len(b.unverified)
    elif b.unverified:
        f.warning(
            "unverified-symbols",
            member,
            f"{plural(len(b.unverified), 'undefined symbol')} not checked "
            f"({_why_unverifiable(ctx, scope)}): {shorten(b.unverified)}",
        )
    return SymbolCheck(
        len(info.undefined),
        b.bound,
        b.python,
        tuple(b.unverified[:LISTED_SYMBOLS]),
        tuple(sorted(set(scope.unverifiable))),
        tuple(b.missing[:LISTED_SYMBOLS]),
    )
