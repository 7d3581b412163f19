"""``unpinned-abi-partner``: a wheel that binds C++ symbols from another distribution's library
must not let pip install a version of that distribution with another C++ ABI.

A C++ (``_Z``) symbol names a function's or class's exact signature and layout; a library
that changes either between versions leaves the old name undefined (an import-time
``undefined symbol``) or, worse, binds a name whose object has another layout. torch keeps
its C++ ABI within a minor version (2.11.x) and changes it between minors, so a partner pin
of ``>=2.11,<2.12`` is enough; any other partner (flash-attn's extension) is pinned to the
exact version built against (``==2.8.3``). No auditwheel-like tool checks this.

A partner is a distribution the vendor's policy says supplies a library the ELF needs, and
from whose installed copy the ELF binds at least one ``_Z`` symbol. Where that copy is not
installed here, the ELF's ``_Z`` symbols that nothing loaded with it defines stand in for it,
as far as they can be told apart: a versioned one belongs to the library its version need
names (``GLIBCXX_3.4.32`` to libstdc++.so.6, never to NCCL); an unversioned one to the partner
only when no other library the ELF needs is unreadable here. Otherwise the finding is a
warning that names every library those symbols may come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import Version

from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves
from wheels.cxxruntime import is_cxx
from wheels.elf import ElfInfo
from wheels.filename import canonicalize_name
from wheels.loading import installed_copy

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

CODE = "unpinned-abi-partner"
# Partners whose C++ ABI holds within a minor version; every other partner: the exact version.
MINOR_SERIES = frozenset({"torch"})
_RELEASE = re.compile(r"^v?(\d+)(?:\.(\d+))?")
_SHOWN = 3  # symbols named in a finding


def abi_range(distribution: str, version: str) -> str:
    """The specifier that admits only versions of ``distribution`` with the ABI of
    ``version``: torch 2.11.0+cu130 -> ``>=2.11,<2.12``; flash-attn 2.8.3 -> ``==2.8.3``."""
    public = version.partition("+")[0]
    if canonicalize_name(distribution) not in MINOR_SERIES:
        return f"=={public}"
    match = _RELEASE.match(public)
    if match is None:
        return f"=={public}"
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return f">={major}.{minor},<{major}.{minor + 1}"


def one_abi(distribution: str, specifier: SpecifierSet) -> bool:
    """Whether every version ``specifier`` admits has one ABI of ``distribution``: one
    version, or for torch one minor series."""
    exact = [s for s in specifier if s.operator == "===" or _exact(s.operator, s.version)]
    if exact:
        return True
    if canonicalize_name(distribution) not in MINOR_SERIES:
        return False
    return _one_minor(specifier)


def _exact(operator: str, version: str) -> bool:
    return operator == "==" and not version.endswith(".*")


def _one_minor(specifier: SpecifierSet) -> bool:
    """Whether ``specifier`` admits versions of one major.minor only."""

    low: Version | None = None
    high: tuple[Version, bool] | None = None  # (bound, inclusive)
    for s in specifier:
        op, text = s.operator, s.version
        if op == "==" and text.endswith(".*"):
            if len(text[:-2].split(".")) >= 2:
                return True
        elif op == "~=" and len(text.split(".")) >= 3:
            return True
        elif op in (">=", ">", "~="):
            low = max(low, Version(text)) if low is not None else Version(text)
        elif op in ("<", "<="):
            bound = (Version(text), op == "<=")
            high = bound if high is None or bound[0] < high[0] else high
    if low is None or high is None:
        return False
    major, minor = (*low.release, 0)[:2]
    if high[1]:
        return (*high[0].release, 0)[:2] == (major, minor)
    return high[0] <= Version(f"{major}.{minor + 1}")


def check_abi_partners(ctx: Elves, f: Findings) -> None:
    """A violation for each partner whose every applicable Requires-Dist line admits another
    ABI (a partner missing from Requires-Dist is the ``requires-dist`` rule's); a warning
    where the symbols may as well come from other libraries not readable here."""
    for distribution, bound in sorted(partners(ctx).items()):
        lines = ctx.requires.get(canonicalize_name(distribution), [])
        if not lines or any(one_abi(distribution, r.parsed().specifier) for r in lines):
            continue
        wanted = "one minor version (e.g. >=2.11,<2.12)" if _minor(distribution) else "==VERSION"
        symbols = bound.symbols
        shown = ", ".join(symbols[:_SHOWN]) + (", ..." if len(symbols) > _SHOWN else "")
        admits = (
            f"Requires-Dist '{lines[0].text}' lets pip install a {distribution} with another "
            f"ABI: pin it to {wanted}, the version built against"
        )
        if not bound.others:
            f.violation(
                CODE,
                bound.member,
                f"binds {len(symbols)} C++ symbol(s) from {bound.library} of {distribution} "
                f"({shown}), but {admits}",
            )
            continue
        f.warning(
            CODE,
            bound.member,
            f"{len(symbols)} C++ symbol(s) that nothing readable here defines ({shown}) may "
            f"come from {bound.library} of {distribution}, or from "
            f"{', '.join(bound.others)} (not readable here either); if any comes from "
            f"{bound.library}, {admits}",
        )


def _minor(distribution: str) -> bool:
    return canonicalize_name(distribution) in MINOR_SERIES


@dataclass(frozen=True)
class Bound:
    """The C++ symbols ``member`` binds from ``library``; ``others`` are the other libraries
    it needs that are not readable here, when the symbols may as well come from them."""

    member: str
    library: str
    symbols: list[str]
    others: tuple[str, ...] = ()


def partners(ctx: Elves) -> dict[str, Bound]:
    """distribution -> what the first member binding it binds, preferring a member whose
    symbols are known to come from it."""
    out: dict[str, Bound] = {}
    for member in sorted(ctx.elfs):
        info = ctx.elfs[member]
        for need in ctx.needs.get(member, ()):
            lib = ctx.policy.supplier(need.soname) if need.kind == "distribution" else None
            if lib is None or (lib.distribution in out and not out[lib.distribution].others):
                continue
            bound = _cxx_bound(ctx, member, info, need.soname)
            if bound.symbols and (lib.distribution not in out or not bound.others):
                out[lib.distribution] = bound
    return out


def _cxx_bound(ctx: Elves, member: str, info: ElfInfo, soname: str) -> Bound:
    """The ``_Z`` symbols ``info`` takes from ``soname`` as its distribution installed it here;
    when it is not installed here, those that nothing loaded with ``info`` defines and that
    can come from ``soname`` (the module docstring says how they are told apart)."""
    lib = ctx.policy.supplier(soname)
    hit = installed_copy(lib, soname, ctx.sites(), ctx.host) if lib is not None else None
    cxx = [
        (n, v) for n, v in zip(info.undefined, info.undefined_versions, strict=True) if is_cxx(n)
    ]
    if hit is not None:
        return Bound(member, soname, [n for n, v in cxx if hit[1].defines(n, v)])
    unbound = [(n, v) for n, v in cxx if (n, v) not in ctx.definers]
    files = _version_files(info)
    versioned = [n for n, v in unbound if v and soname in files.get(v, ())]
    plain = [n for n, v in unbound if not v]
    others = tuple(s for s in _unreadable(ctx, member, info) if s != soname)
    if versioned or not others:
        return Bound(member, soname, versioned + ([] if others else plain))
    return Bound(member, soname, plain, others)


def _version_files(info: ElfInfo) -> dict[str, set[str]]:
    """version name -> the libraries whose version need lists it (GLIBC_2.2.5: libc and libm)."""
    out: dict[str, set[str]] = {}
    for need in info.version_needs:
        for version in need.versions:
            out.setdefault(version, set()).add(need.file)
    return out


def _unreadable(ctx: Elves, member: str, info: ElfInfo) -> list[str]:
    """The libraries ``member`` needs (DT_NEEDED order) that are neither in the wheel nor
    readable here: where its unbound symbols may come from."""
    in_wheel = {n.soname for n in ctx.needs.get(member, ()) if n.kind == "wheel"}
    out = []
    for soname in info.needed:
        if soname in in_wheel or soname.startswith("libpython"):
            continue
        lib = ctx.policy.supplier(soname)
        if lib is not None:
            found = installed_copy(lib, soname, ctx.sites(), ctx.host)
        else:
            found = ctx.host.find(soname, info)
        if found is None:
            out.append(soname)
    return out
