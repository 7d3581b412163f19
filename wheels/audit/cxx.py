"""Private C++ runtimes that C++ symbols cross (:mod:`wheels.cxxruntime` classifies each ELF).

An ELF that carries its own copy of the C++ runtime is harmless while its C++ stays inside it
(a self-contained extension, the common manylinux practice). Once a C++ symbol binds across it
— it calls another ELF's C++ function, or another ELF calls one of its own — C++ objects pass
between two runtimes: an exception thrown by one is not caught by the other's handlers, a
locale or stream made by one is read with the other's facet ids, ``typeid`` and
``dynamic_cast`` compare two sets of type descriptors. The bindings are those ld.so makes: each
undefined ``_Z*`` symbol goes to the first object of the importer's load scope that defines it
(:mod:`wheels.audit.scopes`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves
from wheels.audit.scopes import Scope
from wheels.audit_report import plural, shorten
from wheels.cxxruntime import CxxRuntime, classify, cxx_exports, describe, is_cxx
from wheels.elf import ElfInfo

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

SHOWN = 3
# The standard library's own names (std::, std::ostream, its vtables and type names): listed
# after the program's, which say more about what crosses.
_STD = re.compile(r"^_Z(?:T[VTIS])?N?K?S[tsoiad]")

BREAKS = (
    "Each C++ runtime has its own exception machinery, locale facets and RTTI, so an exception "
    "thrown across the line is not caught (std::terminate, or Python's 'SystemError: ... "
    "returned NULL without setting an exception'), a locale or stream made on one side picks "
    "facets of the wrong kind on the other, and typeid/dynamic_cast across it disagree: link "
    "every library that exchanges C++ with the shared libstdc++.so.6 (no -static-libstdc++)"
)


@dataclass(frozen=True)
class Crossing:
    """C++ symbols bound from ``importer`` to ``definer`` (members, or outside libraries)."""

    importer: str
    definer: str
    symbols: tuple[str, ...]


def check_cxx_runtimes(ctx: Elves, scopes: Mapping[str, Scope], f: Findings) -> dict[str, str]:
    """A violation for each private runtime that C++ symbols cross; each C++ ELF's label for
    its report ("shared", "private (isolated)", ...)."""
    labels: dict[str, str] = {}
    names = {id(info): member for member, info in ctx.elfs.items()}
    grafted = grafted_runtimes(ctx)
    for member, info in ctx.elfs.items():
        found = classify(info)
        if member in grafted:
            labels[member] = "shared (the wheel's one copy, grafted by auditwheel repair)"
        elif found.runtime == "shared" or set(info.needed) & set(grafted.values()):
            labels[member] = "shared"
        elif found.private:
            crossings = [
                *_imports(ctx, member, scopes.get(member), names),
                *_exports(ctx, member, scopes),
            ]
            labels[member] = _private(ctx, member, found, crossings, f)
    return labels


_GRAFTED = re.compile(r"^lib(stdc\+\+|c\+\+)-[0-9a-f]{8}\.so\.")


def is_grafted_runtime(name: str) -> bool:
    """Is ``name`` a C++ runtime ``auditwheel repair`` grafted, by the name it gave it?"""
    return _GRAFTED.match(name) is not None


def grafted_runtimes(ctx: Elves) -> dict[str, str]:
    """The C++ runtime ``auditwheel repair`` grafted into the wheel (``.libs/libstdc++-<hash>
    .so.6``), by member, with the name ELFs need it by: one copy that every ELF needing it
    loads, the shared runtime of the wheel, not a private one."""
    out = {}
    for member, info in ctx.elfs.items():
        name = info.soname or posixpath.basename(member)
        if is_grafted_runtime(name):
            out[member] = name
    return out


def _private(
    ctx: Elves, member: str, found: CxxRuntime, crossings: Sequence[Crossing], f: Findings
) -> str:
    if not crossings:
        exported = "; its copy's symbols are exported" if found.internals else ""
        return f"private (isolated{exported})"
    f.violation(
        "private-cxx-runtime",
        member,
        f"{describe(found)}, and C++ symbols cross it: "
        f"{'; '.join(_said(c, member, ctx) for c in crossings)}. {BREAKS}",
    )
    return f"private (crossed by C++ symbols: {', '.join(_who(c, member) for c in crossings)})"


def _said(c: Crossing, member: str, ctx: Elves) -> str:
    count = plural(len(c.symbols), "C++ symbol")
    symbols = shorten(sorted(c.symbols, key=lambda n: (bool(_STD.match(n)), n)), SHOWN)
    if c.importer == member:
        return f"it takes {count} from {_named(ctx, c.definer)} ({symbols})"
    return f"{_named(ctx, c.importer)} takes {count} from it ({symbols})"


def _who(c: Crossing, member: str) -> str:
    return c.definer if c.importer == member else c.importer


def _named(ctx: Elves, who: str) -> str:
    lib = ctx.policy.supplier(who)
    return f"{who} ({lib.distribution})" if lib is not None else who


def _first_definer(name: str, version: str, providers: Iterable[ElfInfo]) -> ElfInfo | None:
    return next((p for p in providers if p.defines(name, version)), None)


def _imports(
    ctx: Elves, member: str, scope: Scope | None, names: Mapping[int, str]
) -> list[Crossing]:
    """The C++ symbols ``member`` takes from others, by definer; those no readable library
    defines go to the unreadable ones of its scope (another distribution's, first)."""
    info = ctx.elfs[member]
    providers = [p for p in (scope.providers if scope else ()) if p is not info]
    by_definer: dict[str, list[str]] = {}
    unbound: list[str] = []
    for name, version in zip(info.undefined, info.undefined_versions, strict=True):
        if not is_cxx(name):
            continue
        definer = _first_definer(name, version, providers)
        if definer is None:
            unbound.append(name)
        else:
            label = names.get(id(definer)) or definer.soname or "a library loaded with it"
            by_definer.setdefault(label, []).append(name)
    if unbound and scope is not None and scope.unverifiable:
        outside = [u for u in scope.unverifiable if ctx.policy.supplier(u)] or scope.unverifiable
        label = " or ".join(_named(ctx, u) for u in sorted(set(outside)))
        by_definer[f"{label}, not readable here"] = unbound
    return [Crossing(member, d, tuple(s)) for d, s in sorted(by_definer.items())]


def _exports(ctx: Elves, member: str, scopes: Mapping[str, Scope]) -> list[Crossing]:
    """The C++ symbols of ``member`` that the wheel's other ELFs bind to it."""
    info = ctx.elfs[member]
    exported = cxx_exports(info)
    out = []
    for other, other_info in sorted(ctx.elfs.items()):
        scope = scopes.get(other)
        if other == member or scope is None or not any(p is info for p in scope.providers):
            continue
        providers = [p for p in scope.providers if p is not other_info]
        imports = zip(other_info.undefined, other_info.undefined_versions, strict=True)
        taken = [
            name
            for name, version in imports
            if name in exported and _first_definer(name, version, providers) is info
        ]
        if taken:
            out.append(Crossing(other, member, tuple(taken)))
    return out
