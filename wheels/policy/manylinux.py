"""auditwheel's manylinux and musllinux policies, and the libraries each would graft (mirrors
``auditwheel/policy/__init__.py``: ``WheelPolicies`` and ``lddtree_external_references``).

The policy data itself is auditwheel's, read through ``auditwheel.policy``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from wheels.policy.elfutils import blacklisted
from wheels.policy.lddtree import Tree


@functools.lru_cache(maxsize=8)
def manylinux_policies(libc: str, arch: str) -> Any:
    """auditwheel's ``WheelPolicies`` for ``libc`` (glibc/musl) and a baseline architecture."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    return WheelPolicies(libc=Libc(libc), arch=Architecture(arch), musl_policy=None)


class Unsupported(Exception):
    """A wheel auditwheel itself would refuse (or crash on); the message says why."""


def policies_for(libc: str, arch: str) -> Any:
    """:func:`manylinux_policies`, a pair auditwheel has none for raising :class:`Unsupported`."""
    try:
        return manylinux_policies(libc, arch)
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
