"""One audit, start to end: the archive read once (in a pool for big wheels) while its
metadata is checked, then the ELF files and the platform tag; never a traceback."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from wheels.audit.abi_partners import check_abi_partners
from wheels.audit.archive import (
    Archive,
    check_names,
    check_record,
    install_path,
    is_member_file,
    open_archive,
    read_metadata,
    rehash,
    requirements,
)
from wheels.audit.cache import Cache
from wheels.audit.elfs import check_elfs
from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves, classify_extensions
from wheels.audit.members import MemberScan
from wheels.audit.musl import musl_host
from wheels.audit.pool import Children, cores, scan_members, start_children
from wheels.audit.raw import Task, task_for
from wheels.audit.sanitized import sanitized_policy
from wheels.audit.size import check_size
from wheels.audit.tags import auditwheel_verdict, check_tags, manylinux_whitelist, our_verdict
from wheels.audit.variants import check_variant
from wheels.audit_report import AuditStats, CudaReport, ElfReport, Finding, WheelAudit
from wheels.elf import ElfInfo, HostLibraries
from wheels.naming import split_variant, vendor_of_wheel
from wheels.policy import VendorPolicy
from wheels.policy.lddtree import host_library_dirs
from wheels.policy.wheeltools import wheel_platform

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

FEW_UNDEFINED = 1024  # a wheel whose ELF files leave at most this many symbols undefined looks
# up host libraries' definitions in their hash tables, not decoding them all (wheels.elf.lookup):
# this host's libc alone is 3.3 ms to decode, a small wheel's whole audit about 20 ms


def audit_wheel(
    path: str | os.PathLike[str],
    policy: VendorPolicy,
    *,
    cache_dir: Path | None = None,
    workers: int | None = None,
    cuda_architectures: Sequence[str] | None = None,
    max_size: int | None = None,
) -> WheelAudit:
    """Audit one wheel; never raises for anything the wheel contains or lacks.

    ``cache_dir`` enables the result cache there; ``workers`` defaults to the usable cores.
    ``cuda_architectures`` are those the stack declares (stack.yaml's
    ``vendors.nvidia.cuda_architectures``, ``"90"``, ``"100f"``): an NVIDIA wheel's device code
    must run on each; None or empty lists the device code without that check. ``max_size``
    (bytes) makes a larger wheel a violation; without it, one over PyPI's limit is a warning.
    """
    start = time.perf_counter()
    path = os.fspath(path)
    findings = Findings(path)
    archs = tuple(cuda_architectures or ())
    policy = sanitized_policy(path, policy, findings)
    try:
        return _audit(path, policy, cache_dir, workers or cores(), archs, max_size, findings, start)
    except Exception as exc:  # the safety net: a bug here must not become a traceback
        findings.error(
            "internal",
            None,
            f"internal error: the audit stopped early ({type(exc).__name__}: {exc}); "
            "this says nothing about the wheel",
        )
        return _empty(path, policy, findings, start)


def infer_vendor(path: str | os.PathLike[str]) -> str:
    """The vendor a wheel was built for, from its local version: ``+cu130`` -> nvidia; cpu (whose
    policy expects every library in the wheel) when the name says none."""
    return vendor_of_wheel(os.path.basename(path)) or "cpu"


def default_cache_dir(home: Path) -> Path:
    """Where the audit cache lives under the state home."""
    return home / "audit-cache"


def _empty(path: str, policy: VendorPolicy, findings: Findings, start: float) -> WheelAudit:
    stats = AuditStats(0, 0, 0, 0, 0, 0, time.perf_counter() - start)
    return WheelAudit(
        path, policy.name, None, None, (), None, None, (), (), (), tuple(findings.items), stats
    )


def _scan_findings(scans: Sequence[MemberScan], f: Findings) -> None:
    for scan in scans:
        if scan.read_error:
            f.violation(scan.read_code, scan.name, scan.read_error)
        elif scan.elf_error:
            f.violation(
                "bad-elf",
                scan.name,
                f"starts like an ELF file but cannot be read: {scan.elf_error}",
            )
        elif scan.not_elf_but_named:
            f.warning("not-elf", scan.name, "named like a shared library but is not an ELF file")


def _audit(
    path: str,
    policy: VendorPolicy,
    cache_dir: Path | None,
    workers: int,
    archs: tuple[str, ...],
    max_size: int | None,
    f: Findings,
    start: float,
) -> WheelAudit:
    cache = Cache(cache_dir) if cache_dir is not None else None
    children = start_children(path, workers, cache)  # before the zip directory is read
    try:
        archive = open_archive(path, f)
        if archive is None:
            return _empty(path, policy, f, start)
        return _audit_archive(archive, policy, cache, workers, archs, max_size, f, start, children)
    finally:
        if children is not None:
            children.pool.shutdown(wait=False)


def _audit_archive(
    archive: Archive,
    policy: VendorPolicy,
    cache: Cache | None,
    workers: int,
    archs: tuple[str, ...],
    max_size: int | None,
    f: Findings,
    start: float,
    children: Children | None,
) -> WheelAudit:
    path = archive.path
    tasks = [
        task_for(i, info, "sha256") for i, info in enumerate(archive.infos) if is_member_file(info)
    ]
    host = HostLibraries(host_library_dirs())

    def meanwhile() -> None:  # while children start on the largest members
        check_names(archive, f)
        read_metadata(archive, f)

    scans, hits, batches = scan_members(
        path, tasks, cache, workers, meanwhile, lambda: _prepare(archive, host), children
    )
    _scan_findings(scans, f)
    by_name = {s.name: s for s in scans}
    elfs = {n: s.elf for n, s in by_name.items() if s.elf is not None}
    host.symbols_later = sum(len(e.undefined) for e in elfs.values()) <= FEW_UNDEFINED
    plain = auditwheel_verdict(archive, by_name, host)
    arch = plain.arch or _first_arch(elfs.values())
    ctx = _context(archive, policy, elfs, arch, host, f, plain.libc or "glibc")
    reports, cuda = _check_elfs(ctx, archive, by_name, archs, f)
    supplied = frozenset(
        n.soname for ns in ctx.needs.values() for n in ns if n.kind == "distribution"
    )
    verdicts = (plain, our_verdict(archive, by_name, policy, host, plain, supplied))
    check_abi_partners(ctx, f)
    check_tags(archive, verdicts[1], bool(elfs), f)
    devices = {n: s.device for n, s in by_name.items() if s.elf and s.device is not None}
    check_variant(archive, elfs, devices, policy, f)
    size = check_size(archive, devices, max_size, f)
    check_record(archive, rehash(archive, path, scans), f)
    stats = _stats(archive, tasks, len(elfs), hits, batches, start)
    return WheelAudit(
        path=path,
        vendor=policy.name,
        distribution=archive.distribution,
        version=str(archive.version) if archive.version else None,
        declared=tuple(sorted(set(archive.file_tags) | set(archive.wheel_tags))),
        tag=verdicts[1].tag,
        auditwheel_tag=verdicts[0].tag,
        tag_reasons=verdicts[1].reasons,
        requires=tuple(r.text for r in archive.requires),
        elfs=tuple(reports),
        findings=tuple(_ordered(f.items)),
        stats=stats,
        cuda=cuda,
        size=size,
    )


def _stats(
    archive: Archive, tasks: Sequence[Task], elfs: int, hits: int, batches: int, start: float
) -> AuditStats:
    return AuditStats(
        members=len(archive.infos),
        elf_members=elfs,
        compressed_bytes=sum(t.compress_size for t in tasks),
        uncompressed_bytes=sum(t.file_size for t in tasks),
        cached_batches=hits,
        batches=batches,
        seconds=time.perf_counter() - start,
    )


def _check_elfs(
    ctx: Elves,
    archive: Archive,
    by_name: Mapping[str, MemberScan],
    archs: tuple[str, ...],
    f: Findings,
) -> tuple[list[ElfReport], CudaReport | None]:
    """Every ELF's checks and report, its CUDA device code among them."""
    devices = {n: s.device for n, s in by_name.items() if s.elf and s.device is not None}
    errors = {n: s.device_error for n, s in by_name.items() if s.elf and s.device_error}
    cuda = None
    if devices or errors:  # the CUDA rules only for a wheel with device code
        from wheels.cuda.audit import check_cuda

        cuda = check_cuda(archive, devices, errors, ctx.policy.name, archs, f)
    reports = [replace(r, device=devices.get(r.member)) for r in check_elfs(ctx, archive, f)]
    return reports, cuda


def _prepare(archive: Archive, host: HostLibraries) -> None:
    """Work the analysis will need anyway, done while children finish their last members."""
    arch, _, _ = wheel_platform(split_variant(archive.name)[0])
    if arch is not None:
        manylinux_whitelist(arch)
    host.prefetch(
        (
            "libc.so.6",
            "libm.so.6",
            "libstdc++.so.6",
            "libgcc_s.so.1",
            "libpthread.so.0",
            "libdl.so.2",
            "librt.so.1",
        )
    )


def _first_arch(elfs: Iterable[ElfInfo]) -> str | None:
    return next((e.arch for e in elfs if e.arch), None)


def _context(
    archive: Archive,
    policy: VendorPolicy,
    elfs: dict[str, ElfInfo],
    arch: str | None,
    host: HostLibraries,
    f: Findings,
    libc: str = "glibc",
) -> Elves:
    """What the per-ELF checks need; a musl wheel's host libraries are musl's (never glibc's)."""
    install_of = {
        i.filename: install_path(archive, i.filename) for i in archive.infos if is_member_file(i)
    }
    installed = {p: m for m, p in install_of.items() if p is not None}
    ctx = Elves(
        policy=policy,
        elfs=elfs,
        install_of=install_of,
        installed=installed,
        requires=requirements(archive),
        whitelist=manylinux_whitelist(arch, libc),
        host=musl_host() if libc == "musl" else host,
        arch=arch,
        libc=libc,
    )
    classify_extensions(ctx, f)
    return ctx


def _ordered(items: Iterable[Finding]) -> list[Finding]:
    rank = {"error": 0, "violation": 1, "warning": 2}
    return sorted(items, key=lambda i: (rank[i.severity], i.member or "", i.code))
