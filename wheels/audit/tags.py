"""The platform tag: what the wheel declares against what its ELF files allow
(:func:`wheels.policy.platform_verdict`, auditwheel's rules)."""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import TYPE_CHECKING

from wheels.audit.archive import Archive
from wheels.audit.findings import Findings
from wheels.audit.members import MemberScan
from wheels.audit.musl import is_musl_self
from wheels.elf import HostLibraries
from wheels.naming import split_variant
from wheels.policy import VendorPolicy
from wheels.policy.manylinux import manylinux_policies
from wheels.policy.wheel_abi import TagVerdict, pep600, platform_verdict

if TYPE_CHECKING:
    from collections.abc import Mapping


def manylinux_whitelist(arch: str | None, libc: str = "glibc") -> frozenset[str]:
    """Every library some manylinux (musllinux) policy lets a wheel for ``arch`` take from the
    system."""
    if arch is None:
        return frozenset()
    try:
        policies = manylinux_policies(libc, arch, every_musl=True)
    except (ValueError, KeyError):
        return frozenset()
    return frozenset().union(*(p.whitelist for p in policies))


def check_tags(archive: Archive, verdict: TagVerdict, has_elf: bool, f: Findings) -> None:
    """The platform tags the wheel declares against what ``verdict`` (PEP 600's) allows."""
    declared = sorted(set(archive.file_tags) | set(archive.wheel_tags))
    for tag in declared:
        if tag == "any":
            if has_elf:
                f.violation("platform-tag", None, "tagged 'any' (pure Python) but holds ELF files")
            continue
        if not has_elf or verdict.error:
            continue
        allowed = verdict.allows(tag)
        if allowed is False:
            why = "; ".join(verdict.reasons)
            f.violation(
                "platform-tag",
                None,
                f"declares {tag}, but its ELF files need {_needed(verdict)}"
                + (f": {why}" if why else ""),
            )
        elif allowed is None:
            f.violation(
                "platform-tag",
                None,
                f"declares {tag}, which does not fit its ELF files "
                f"({verdict.libc or 'unknown libc'}, {verdict.arch or 'unknown arch'})",
            )
    if has_elf and verdict.error:
        f.warning("platform-tag", None, f"no platform verdict: {verdict.error}")


def _needed(verdict: TagVerdict) -> str:
    if verdict.needs is None:
        return f"more than any {verdict.family} system provides ({verdict.tag})"
    version = ".".join(map(str, verdict.needs))
    return f"{verdict.libc} {version} or newer ({verdict.tag} at best)"


def auditwheel_verdict(
    archive: Archive, scans: Mapping[str, MemberScan], host: HostLibraries
) -> TagVerdict:
    """The verdict ``auditwheel show`` gives."""
    members = {n: s.elf for n, s in scans.items()}
    order = archive.record_order or list(members)
    return platform_verdict(split_variant(archive.name)[0], members, order, host)


def our_verdict(
    archive: Archive,
    scans: Mapping[str, MemberScan],
    policy: VendorPolicy,
    host: HostLibraries,
    plain: TagVerdict,
    supplied: frozenset[str] = frozenset(),
) -> TagVerdict:
    """PEP 600's verdict, with the vendor's outside libraries and ``supplied`` (libraries a
    declared distribution installs where the wheel finds them) excluded."""
    members = {n: s.elf for n, s in scans.items()}
    order = archive.record_order or list(members)
    name = split_variant(archive.name)[0]
    bundled = {posixpath.basename(n) for n, e in members.items() if e is not None}

    musl = plain.libc == "musl"

    def excluded(soname: str) -> bool:  # like ``auditwheel repair --exclude``
        if musl and is_musl_self(soname):  # musl's loader answers with the C library itself
            return True
        return (policy.outside_wheel(soname) or soname in supplied) and soname not in bundled

    needed = {n for e in members.values() if e is not None for n in e.needed}
    ours = plain
    if any(excluded(n) for n in needed) or musl:
        ours = platform_verdict(name, members, order, host, excluded, every_musl=True)
    return pep600_verdict(ours)


def pep600_verdict(verdict: TagVerdict) -> TagVerdict:
    """``verdict`` as PEP 600 has it: the tag of the libc version the ELF files need, whether
    or not auditwheel has a policy of that name, and the reasons said that way round."""
    if verdict.needs is None or verdict.tag is None:
        return verdict
    tag = verdict.pep600_tag()
    reasons = list(verdict.reasons)
    if verdict.glibc is not None and verdict.glibc == verdict.needs:  # glibc's versions decide
        best = max(verdict.priorities, key=lambda t: verdict.priorities[t], default=None)
        floor = pep600(best) if best else None
        reasons = [r for r in reasons if not r.startswith("symbol versions ")]
        if floor is not None and verdict.needs > floor[1]:
            version = ".".join(map(str, verdict.needs))
            reasons.append(f"symbol version GLIBC_{version} needs glibc {version} or newer")
    return replace(verdict, tag=tag, reasons=tuple(reasons))
