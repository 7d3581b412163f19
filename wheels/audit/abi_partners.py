"""``unpinned-abi-partner``: a wheel that binds C++ symbols from another distribution's library
must not let pip install a version of that distribution with another C++ ABI.

A C++ (``_Z``) symbol names a function's or class's exact signature and layout; a library
that changes either between versions leaves the old name undefined (an import-time
``undefined symbol``) or, worse, binds a name whose object has another layout. torch keeps
its C++ ABI within a minor version (2.11.x) and changes it between minors, so a partner pin
of ``>=2.11,<2.12`` is enough; any other partner (flash-attn's extension) is pinned to the
exact version built against (``==2.8.3``). No auditwheel-like tool checks this.

A partner is a distribution the vendor's policy says supplies a library the ELF needs, and
from whose installed copy the ELF binds at least one ``_Z`` symbol; where that copy is not
installed here, the ELF's ``_Z`` symbols that nothing loaded with it defines stand in for it.
"""

from __future__ import annotations

import re

from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves
from wheels.elf import ElfInfo
from wheels.filename import canonicalize_name
from wheels.loading import installed_copy

TYPE_CHECKING = False
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
    from packaging.version import Version

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
    ABI (a partner missing from Requires-Dist is the ``requires-dist`` rule's)."""
    for distribution, (member, library, symbols) in sorted(partners(ctx).items()):
        lines = ctx.requires.get(canonicalize_name(distribution), [])
        if not lines or any(one_abi(distribution, r.parsed().specifier) for r in lines):
            continue
        wanted = "one minor version (e.g. >=2.11,<2.12)" if _minor(distribution) else "==VERSION"
        shown = ", ".join(symbols[:_SHOWN]) + (", ..." if len(symbols) > _SHOWN else "")
        f.violation(
            CODE,
            member,
            f"binds {len(symbols)} C++ symbol(s) from {library} of {distribution} ({shown}), "
            f"but Requires-Dist '{lines[0].text}' lets pip install a {distribution} with "
            f"another ABI: pin it to {wanted}, the version built against",
        )


def _minor(distribution: str) -> bool:
    return canonicalize_name(distribution) in MINOR_SERIES


def partners(ctx: Elves) -> dict[str, tuple[str, str, list[str]]]:
    """distribution -> (the first member binding it, the library, the C++ symbols bound)."""
    out: dict[str, tuple[str, str, list[str]]] = {}
    for member in sorted(ctx.elfs):
        info = ctx.elfs[member]
        for need in ctx.needs.get(member, ()):
            lib = ctx.policy.supplier(need.soname) if need.kind == "distribution" else None
            if lib is None or lib.distribution in out:
                continue
            symbols = _cxx_bound(ctx, info, need.soname)
            if symbols:
                out[lib.distribution] = (member, need.soname, symbols)
    return out


def _cxx_bound(ctx: Elves, info: ElfInfo, soname: str) -> list[str]:
    """The ``_Z`` symbols ``info`` takes from ``soname`` as its distribution installed it here;
    when it is not installed here, those that nothing loaded with ``info`` defines."""
    lib = ctx.policy.supplier(soname)
    hit = installed_copy(lib, soname, ctx.sites(), ctx.host) if lib is not None else None
    cxx = [
        (n, v)
        for n, v in zip(info.undefined, info.undefined_versions, strict=True)
        if n[:2] == "_Z"
    ]
    if hit is not None:
        return [n for n, v in cxx if hit[1].defines(n, v)]
    return [n for n, v in cxx if (n, v) not in ctx.definers]
