"""auditwheel's manylinux and musllinux policies, and the libraries each would graft (mirrors
``auditwheel/policy/__init__.py``: ``WheelPolicies`` and ``lddtree_external_references``; and
``auditwheel/architecture.py``).

The policy data itself is auditwheel's own JSON (``auditwheel/policy/*-policy.json``); what
auditwheel's constructor does with the data is mirrored step for step (tests/unit/test_policy.py
holds the two equal for every architecture); its check of the data's PEP 600 consistency is left
to auditwheel's own tests.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache, total_ordering
from typing import TYPE_CHECKING

import auditwheel

from wheels.policy.elfutils import blacklisted
from wheels.policy.lddtree import Tree

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

# auditwheel.architecture.Architecture, in its order (is_subset compares positions).
ARCHITECTURES = (
    "aarch64",
    "arm64_v8a",
    "armv7l",
    "i686",
    "loongarch64",
    "ppc64",
    "ppc64le",
    "riscv64",
    "s390x",
    "x86_64",
    "x86_64_v2",
    "x86_64_v3",
    "x86_64_v4",
)


def baseline(arch: str) -> str:
    """auditwheel's ``Architecture.baseline``: x86_64 for x86_64_v3, aarch64 for arm64_v8a."""
    if arch.startswith("arm64"):
        return "aarch64"
    return "x86_64" if arch.startswith("x86_64") else arch


def is_superset(arch: str, other: str) -> bool:
    """auditwheel's ``Architecture.is_superset``: ``arch`` runs whatever ``other`` runs."""
    if baseline(arch) != baseline(other):
        return False
    return ARCHITECTURES.index(other) <= ARCHITECTURES.index(arch)


@total_ordering
@dataclass(frozen=True, eq=True)
class Policy:
    """auditwheel's ``Policy``: one platform tag's symbol versions and libraries."""

    name: str
    aliases: tuple[str, ...]
    priority: int
    symbol_versions: Mapping[str, frozenset[str]]
    whitelist: frozenset[str]
    blacklist: Mapping[str, frozenset[str]]

    def __lt__(self, other: object) -> bool:  # ordered by priority, as auditwheel's
        if not isinstance(other, Policy):
            return NotImplemented
        return self.priority < other.priority

    def __hash__(self) -> int:
        return hash((self.name, self.priority))


@dataclass(frozen=True)
class Policies:
    """auditwheel's ``WheelPolicies`` for one libc and architecture, lowest priority first."""

    libc: str
    architecture: str
    policies: tuple[Policy, ...]

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.policies)

    @property
    def linux(self) -> Policy:
        return self.policies[0]

    @property
    def highest(self) -> Policy:
        return self.policies[-1]

    def versioned_symbols_policy(self, versioned: Mapping[str, set[str]]) -> Policy:
        """The best policy whose symbol versions hold every one of ``versioned``'s."""
        # By family (GLIBC of GLIBC_2.17), the versions after it ("2.17"; None for a name
        # without "_", which no policy allows), held against each policy's own sets, not
        # against "GLIBC_2.17" strings made anew for every policy (auditwheel's way).
        required: dict[str, set[str | None]] = {}
        for symbols in versioned.values():
            for symbol in symbols:
                family, sep, version = symbol.partition("_")
                required.setdefault(family, set()).add(version if sep else None)
        for p in reversed(self.policies):
            allowed = p.symbol_versions
            if all(needed <= allowed[k] for k, needed in required.items() if k in allowed):
                return p
        return self.linux  # unreachable: linux allows everything


def _policy_file(libc: str) -> str:
    name = {"glibc": "manylinux", "musl": "musllinux"}[libc]
    return os.path.join(auditwheel.__path__[0], "policy", f"{name}-policy.json")


@lru_cache(maxsize=2)
def _policy_data(libc: str) -> list[dict[str, Any]]:
    with open(_policy_file(libc), encoding="utf-8") as fh:
        data: list[dict[str, Any]] = json.load(fh)
    return data


def _musl_libc_soname(arch: str) -> str:
    """auditwheel's _fixup_musl_libc_soname for ``libc.so``."""
    return {
        "x86_64": "libc.musl-x86_64.so.1",
        "i686": "libc.musl-x86.so.1",
        "aarch64": "libc.musl-aarch64.so.1",
        "s390x": "libc.musl-s390x.so.1",
        "ppc64le": "libc.musl-ppc64le.so.1",
        "armv7l": "libc.musl-armv7.so.1",
        "riscv64": "libc.musl-riscv64.so.1",
        "loongarch64": "libc.musl-loongarch64.so.1",
    }[baseline(arch)]


def _from_entry(entry: Mapping[str, Any], libc: str, arch: str) -> Policy:
    base = baseline(arch)
    linux = entry["name"] == "linux"
    versions = {} if linux else entry["symbol_versions"][base]
    whitelist = list(entry["lib_whitelist"])
    if libc == "musl":
        whitelist = [_musl_libc_soname(arch) if w == "libc.so" else w for w in whitelist]
    return Policy(
        name=f"{entry['name']}_{base}",
        aliases=tuple(f"{a}_{base}" for a in entry["aliases"]),
        priority=entry["priority"],
        symbol_versions={k: frozenset(v) for k, v in versions.items()},
        whitelist=frozenset(whitelist),
        blacklist={k: frozenset(v) for k, v in entry["blacklist"].items()},
    )


def host_has_musl_libc() -> bool:
    """Could auditwheel's ``Libc`` find a musl C library here? It looks for one
    ``/lib/libc.musl-*.so.1``."""
    try:
        names = os.listdir("/lib")
    except OSError:
        return False
    return any(n.startswith("libc.musl-") and n.endswith(".so.1") for n in names)


def _host_musl_policy() -> str | None:
    """The musllinux policy of this host's musl, as auditwheel picks it; None on glibc."""
    if not host_has_musl_libc():
        return None
    from auditwheel.error import InvalidLibcError
    from auditwheel.libc import Libc  # (on a musl host only)

    try:
        version = Libc.MUSL.get_current_version()
    except InvalidLibcError:
        return None
    return f"musllinux_{version.major}_{version.minor}"


@lru_cache(maxsize=8)
def manylinux_policies(libc: str, arch: str, every_musl: bool = False) -> Policies:
    """auditwheel's ``WheelPolicies`` for ``libc`` (glibc/musl) and a baseline architecture;
    ValueError or KeyError for a pair auditwheel has none for. For musl, auditwheel keeps one
    musllinux policy (the host's musl, else the newest it knows); ``every_musl`` keeps all of
    them, so that a wheel is judged by the musl it was built for, not by this host."""
    if arch not in ARCHITECTURES or libc not in ("glibc", "musl"):
        raise ValueError(f"no policies for {libc} on {arch}")
    musl = _host_musl_policy() if libc == "musl" and not every_musl else None
    chosen = [
        _from_entry(e, libc, arch)
        for e in _policy_data(libc)
        if (musl is None or e["name"] in ("linux", musl))
        and (arch in e["symbol_versions"] or e["name"] == "linux")
    ]
    chosen.sort()
    if libc == "musl" and not every_musl:  # the host's version, else the newest it knows
        chosen = chosen[:2]
        if len(chosen) != 2:
            raise ValueError(f"no musllinux policy for {arch}")
    return Policies(libc, arch, tuple(chosen))


class Unsupported(Exception):
    """A wheel auditwheel itself would refuse (or crash on); the message says why."""


def policies_for(libc: str, arch: str, every_musl: bool = False) -> Any:
    """:func:`manylinux_policies`, a pair auditwheel has none for raising :class:`Unsupported`."""
    try:
        return manylinux_policies(libc, arch, every_musl)
    except (ValueError, KeyError, IndexError) as exc:  # e.g. musl on big-endian ppc64
        raise Unsupported(f"auditwheel has no policies for {libc} on {arch}: {exc}") from None


@dataclass
class Ref:
    """auditwheel's ExternalReference: per policy, libraries to graft and blacklisted symbols."""

    libs: dict[str, str | None]
    blacklist: dict[str, list[str]]
    policy: Any


def _filter_libs(libs: Iterable[str], whitelist: frozenset[str]) -> Iterable[str]:
    for lib in libs:
        if "ld-linux" in lib or lib in ("ld64.so.2", "ld64.so.1") or lib in whitelist:
            continue
        yield lib


def external_refs(policies: Any, tree: Tree) -> dict[str, Ref]:
    """auditwheel's ``lddtree_external_references`` for one ELF tree."""
    out: dict[str, Ref] = {}
    for p in policies:
        libs: dict[str, str | None] = {}
        blacklist: dict[str, list[str]] = {}
        if p != policies.linux:
            reduced = {k: p.blacklist[k] for k in set(p.blacklist) & set(tree.needed)}
            blacklist = blacklisted(tree.info, reduced)
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
        out[p.name] = Ref(libs, blacklist, p)
    return out
