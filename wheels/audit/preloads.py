"""What a package's ``__init__.py`` loads before its extension modules, and the needs that ask
for it (:mod:`wheels.loading`).

A need whose vendor policy names an import (``libtorch_python.so``: ``import torch``) is found
through RUNPATH only where its distribution sits in the wheel's own site-packages; the package
must import it first so that ld.so finds it loaded, wherever pip installed it. A need that only
an import can load (flash-attn's ``flash_attn_2_cuda``, no SONAME) must not be a DT_NEEDED at
all: the package imports it, after what it needs, and makes its symbols global; the library it
provides then joins the scope of every ELF the package's extensions load.
"""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.audit.archive import Archive
from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves
from wheels.audit.scopes import Scope, init_text, packages_loading
from wheels.filename import canonicalize_name
from wheels.loading import installed_copy, loaded_by_import, preload_modules
from wheels.naming import extension_parts
from wheels.policy import DistLib

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


@dataclass(frozen=True)
class Preloads:
    """A package's top-level imports before its first relative import, in order, and those of
    them whose extension module it makes global (``ctypes.CDLL(m.__file__, ... RTLD_GLOBAL``)."""

    imports: tuple[str, ...] = ()
    made_global: frozenset[str] = frozenset()

    def first(self, modules: Sequence[str]) -> bool:
        """Does it import ``modules``, in this order, before anything relative?"""
        at = [self.imports.index(m) if m in self.imports else -1 for m in modules]
        return -1 not in at and at == sorted(at)


def read_preloads(archive: Archive, ctx: Elves, package: str) -> Preloads:
    """What ``package``'s ``__init__.py`` (in the wheel) imports first; nothing when it has
    none or it cannot be read."""

    text = init_text(archive, ctx, package)
    try:
        body = ast.parse(text).body if text else []
    except (SyntaxError, ValueError):
        return Preloads()
    imports: list[str] = []
    made_global: set[str] = set()
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level:
            break
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imports.append(node.module)
        elif (module := _made_global(node)) is not None and module in imports:
            made_global.add(module)
    return Preloads(tuple(imports), frozenset(made_global))


def _mentions(archive: Archive, ctx: Elves, package: str, word: bytes) -> bool:
    """Does ``package``'s ``__init__.py`` in the wheel hold ``word`` at all?"""
    return word in init_text(archive, ctx, package)


def _made_global(node: ast.stmt) -> str | None:
    """``m`` for a statement ``...CDLL(m.__file__, ... RTLD_GLOBAL ...)``."""

    call = node.value if isinstance(node, ast.Expr) else None
    if not isinstance(call, ast.Call) or not call.args:
        return None
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    path = call.args[0]
    if name != "CDLL" or not (isinstance(path, ast.Attribute) and path.attr == "__file__"):
        return None
    flags = {n.attr for a in (*call.args[1:], *call.keywords) for n in ast.walk(a)
             if isinstance(n, ast.Attribute)}  # fmt: skip
    return ast.unparse(path.value) if "RTLD_GLOBAL" in flags else None


def check_preloads(ctx: Elves, archive: Archive, scopes: Mapping[str, Scope], f: Findings) -> None:
    """The needs that call for an import, against what each package imports first; the
    libraries the packages make global, added to the scopes of what they load."""
    cache: dict[str, Preloads] = {}

    def preloads(package: str) -> Preloads:
        if package not in cache:
            cache[package] = read_preloads(archive, ctx, package)
        return cache[package]

    for member in sorted(ctx.elfs):
        for need in ctx.needs.get(member, ()):
            lib = ctx.policy.supplier(need.soname)
            if need.kind != "wheel" and lib is not None and lib.module is not None:
                _check_need(ctx, member, need.soname, lib, preloads, f)
    for package in sorted({posixpath.dirname(ctx.install_of.get(r) or r) for r in ctx.extensions}):
        if not _mentions(archive, ctx, package, b"RTLD_GLOBAL"):
            continue  # nothing made global: no need to parse it
        for module in sorted(preloads(package).made_global):
            _join_scopes(ctx, package, module, preloads(package), scopes, f)


def _check_need(
    ctx: Elves,
    member: str,
    soname: str,
    lib: DistLib,
    preloads: Callable[[str], Preloads],
    f: Findings,
) -> None:
    modules = preload_modules(lib)
    if loaded_by_import(soname, lib):
        f.violation(
            "import-only-need",
            member,
            f"needs {soname} ({lib.distribution}), a Python extension module without a SONAME: "
            f"ld.so finds it only through RUNPATH, so only where {lib.distribution} is "
            "installed in this wheel's own site-packages; installed in another site directory "
            "(a venv that sees the system's packages, a .pth), loading fails with 'cannot open "
            "shared object file', and importing it first does not help (ld.so never matches a "
            "need to an object loaded by path without a SONAME). Drop the DT_NEEDED and load it "
            f"in the package: import {', '.join(modules)}, then ctypes.CDLL({lib.module}"
            ".__file__, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) (as infini-stack's assembler does)",
        )
        return
    packages = [p for p in packages_loading(ctx, member) if p]  # a top-level module has none
    missing = [p for p in packages if not preloads(p).first(modules)]
    if missing:
        f.violation(
            "import-first",
            member,
            f"needs {soname} ({lib.distribution}), which its RUNPATH finds only where "
            f"{lib.distribution} is installed in this wheel's own site-packages; import "
            f"{', '.join(modules)} first in {', '.join(f'{p}/__init__.py' for p in missing)}, "
            "so that ld.so finds it loaded wherever pip installed it",
        )


def _join_scopes(
    ctx: Elves,
    package: str,
    module: str,
    pre: Preloads,
    scopes: Mapping[str, Scope],
    f: Findings,
) -> None:
    """The library ``package`` makes global (its ``module``), in the scope of every ELF its
    extensions load: found here, or unverifiable."""
    init = posixpath.join(package, "__init__.py") if package else "__init__.py"
    libs = _libraries_of(ctx, module)
    if not libs:
        return
    soname, lib = libs[0]
    if not pre.first((*lib.after, module)):
        f.violation(
            "import-order",
            init,
            f"imports {module} ({lib.distribution}) without importing {', '.join(lib.after)} "
            "before it, which it needs loaded first",
        )
    if canonicalize_name(lib.distribution) not in ctx.requires:
        f.violation(
            "requires-dist",
            init,
            f"loads {module} from {lib.distribution}, but {lib.distribution} is not in "
            "Requires-Dist",
        )
    hit = next((h for s, lib in libs if (h := installed_copy(lib, s, ctx.sites(), ctx.host))), None)
    roots = [r for r in ctx.extensions if posixpath.dirname(ctx.install_of.get(r) or r) == package]
    for member in {m for r in roots for m in ctx.groups[r].members}:
        scope = scopes[member]
        if hit is not None:
            scope.providers.insert(0, hit[1])  # global: searched before the local scope
        elif soname not in scope.unverifiable:
            scope.unverifiable.append(soname)


def _libraries_of(ctx: Elves, module: str) -> list[tuple[str, DistLib]]:
    """The policy's libraries that importing ``module`` loads, those of this wheel's Python
    first (the extension suffix its own extension modules have)."""
    suffixes = {
        named[1]
        for r in ctx.extensions
        if (named := extension_parts(posixpath.basename(ctx.install_of.get(r) or r)))
    }
    libs = [
        (s, lib)
        for s, lib in ctx.policy.distributions.items()
        if lib.module == module and loaded_by_import(s, lib)
    ]
    return sorted(libs, key=lambda x: (x[0].split(".")[1] not in suffixes, x[0]))
