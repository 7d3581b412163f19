"""The platform tag: what the wheel declares against what its ELF files allow
(:func:`wheels.policy.platform_verdict`, auditwheel's rules)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from wheels.audit.archive import Archive
from wheels.audit.findings import Findings
from wheels.audit.members import MemberScan
from wheels.elf import HostLibraries
from wheels.naming import split_variant
from wheels.policy import VendorPolicy
from wheels.policy.manylinux import manylinux_policies
from wheels.policy.wheel_abi import TagVerdict, platform_verdict


def manylinux_whitelist(arch: str | None) -> frozenset[str]:
    """Every library some manylinux policy lets a wheel for ``arch`` take from the system."""
    if arch is None:
        return frozenset()
    try:
        policies = manylinux_policies("glibc", arch)
    except (ValueError, KeyError):
        return frozenset()
    return frozenset().union(*(p.whitelist for p in policies))


def check_tags(archive: Archive, verdict: TagVerdict, has_elf: bool, f: Findings) -> None:
    """The platform tags the wheel declares against what ``verdict`` allows."""
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
            why = "; ".join(verdict.reasons) or "its ELF files"
            note = (
                ""
                if verdict.has_policy(tag)
                else f" (auditwheel has no {tag} policy: compared by its libc version, as PEP 600 "
                "defines the tag)"
            )
            f.violation(
                "platform-tag",
                None,
                f"declares {tag}, but its ELF files allow at most {verdict.tag}{note}: {why}",
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


def tag_verdicts(
    archive: Archive,
    scans: Mapping[str, MemberScan],
    policy: VendorPolicy,
    host: HostLibraries,
) -> tuple[TagVerdict, TagVerdict]:
    """auditwheel's own verdict, and the one with the vendor's outside libraries excluded."""
    members = {n: s.elf for n, s in scans.items()}
    order = archive.record_order or list(members)
    plain = platform_verdict(split_variant(archive.path.name)[0], members, order, host)
    bundled = {posixpath.basename(n) for n, e in members.items() if e is not None}

    def excluded(soname: str) -> bool:  # like ``auditwheel repair --exclude``
        return policy.outside_wheel(soname) and soname not in bundled

    needed = {n for e in members.values() if e is not None for n in e.needed}
    if not any(excluded(n) for n in needed):
        return plain, plain
    return plain, platform_verdict(
        split_variant(archive.path.name)[0], members, order, host, excluded
    )
