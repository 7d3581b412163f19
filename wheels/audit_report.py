"""What a wheel audit found, and its two renderings: a summary for people, JSON for machines."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from builder.core import termwrap
from wheels.sizes import human_size

if TYPE_CHECKING:
    from wheels.cuda.fatbin import DeviceCode

Severity = Literal["violation", "warning", "error"]  # error: the audit's own failure
NeedKind = Literal["wheel", "distribution", "system", "external", "libpython", "missing"]
ElfKind = Literal["extension", "library", "executable"]

JSON_VERSION = 1
_SHOWN = 8


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem, located: the wheel, the member when there is one, and what is wrong."""

    severity: Severity
    code: str
    wheel: str
    member: str | None
    message: str

    @property
    def location(self) -> str:
        return f"{self.wheel}:{self.member}" if self.member else self.wheel

    def line(self) -> str:
        return f"{self.severity}: {self.location}: {self.message} [{self.code}]"


@dataclass(frozen=True, slots=True)
class Need:
    """One DT_NEEDED entry and where it resolves."""

    soname: str
    kind: NeedKind
    where: str | None


@dataclass(frozen=True, slots=True)
class SymbolCheck:
    """Undefined, non-weak dynamic symbols of one ELF against the libraries it loads."""

    undefined: int
    bound: int
    python: int
    unverified: tuple[str, ...]
    unverifiable_from: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True)
class ElfReport:
    """What the audit found about one ELF file of the wheel."""

    member: str
    kind: ElfKind
    arch: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    version_needs: dict[str, tuple[str, ...]]
    version_defs: tuple[str, ...]
    exports: int
    needs: tuple[Need, ...]
    symbols: SymbolCheck
    isa: str | None
    defined_names: str = ""  # NUL-separated, as ElfInfo.export_names
    undefined_names: tuple[str, ...] = ()
    device: DeviceCode | None = None  # the CUDA device code it carries (distinct images)
    cxx_runtime: str | None = None  # "shared", "private (isolated)", ...; None: no C++ seen


@dataclass(frozen=True)
class CudaReport:
    """The CUDA device code of a wheel's ELF files, and what it was checked against."""

    elfs: int  # ELF files that carry device code
    sass: tuple[str, ...]  # what the CUDA runtime loads from them, all together
    ptx: tuple[str, ...]
    architectures: tuple[str, ...]  # declared (stack.yaml, --cuda-arch); () when none given
    runtime: str | None  # the CUDA runtime the wheel declares, "13.0"
    runtime_from: str | None  # where it says so
    checked: bool  # the vendor's wheels are checked (nvidia)


@dataclass(frozen=True, slots=True)
class MemberSize:
    """A member of the wheel: what it takes in the archive, and unpacked."""

    member: str
    compressed: int
    unpacked: int


@dataclass(frozen=True, slots=True)
class DeviceSize:
    """One ELF's CUDA device code per target (sm_90, compute_90): bytes in its fat binaries,
    as stored (compressed where nvcc compressed them) and unpacked."""

    member: str
    targets: tuple[tuple[str, int, int], ...]  # (target, stored, unpacked), by target


@dataclass(frozen=True)
class SizeReport:
    """How big the wheel is, against which limit, and what makes it so."""

    wheel_bytes: int  # the wheel file
    unpacked: int
    limit: int  # the limit held to: wheel.max_size / --max-size, else PyPI's default
    limit_from: str  # "wheel.max_size / --max-size" or "PyPI's default upload limit"
    largest: tuple[MemberSize, ...]
    device: tuple[DeviceSize, ...]


@dataclass(frozen=True)
class AuditStats:
    """How much the audit read, and how long it took."""

    members: int
    elf_members: int
    compressed_bytes: int
    uncompressed_bytes: int
    cached_batches: int
    batches: int
    seconds: float


@dataclass(frozen=True)
class WheelAudit:
    """The audit of one wheel; ``ok`` is what a release gate looks at."""

    path: str  # as given
    vendor: str
    distribution: str | None
    version: str | None
    declared: tuple[str, ...]
    tag: str | None
    auditwheel_tag: str | None
    tag_reasons: tuple[str, ...]
    requires: tuple[str, ...]
    elfs: tuple[ElfReport, ...]
    findings: tuple[Finding, ...]
    stats: AuditStats
    cuda: CudaReport | None = None
    size: SizeReport | None = None

    @property
    def name(self) -> str:
        """The wheel's file name."""
        return os.path.basename(self.path)

    @property
    def violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "violation")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def errors(self) -> tuple[Finding, ...]:
        """The audit's own failures (exit 1): no verdict on the wheel, for or against."""
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def ok(self) -> bool:
        return not self.violations and not self.errors


# ---------------------------------------------------------------------------------------------
# text


def render_text(audits: list[WheelAudit], width: int | None = None) -> str:
    """Per wheel: verdict and tags, violations first, then each ELF's needs and where they go.

    ``width`` (a terminal's): every line wrapped to it with a hanging indent, paths broken after
    a ``/``; ``None`` (logs, pipes, files): whole lines."""
    blocks = [_wheel_text(a) for a in audits]
    if len(audits) > 1:
        bad = sum(not a.ok for a in audits)
        blocks.append(f"{len(audits)} wheels audited: {len(audits) - bad} passed, {bad} failed")
    return termwrap.fit("\n\n".join(blocks), width)


def _wheel_text(audit: WheelAudit) -> str:
    verdict = "PASS" if audit.ok else f"FAIL ({plural(len(audit.violations), 'violation')})"
    if audit.errors:
        verdict = "INTERNAL ERROR (the audit failed, not the wheel)"
    lines = [
        f"{audit.name}: {verdict}",
        f"  vendor {audit.vendor}; declared {', '.join(audit.declared) or '(none)'}; "
        f"ELF contents allow {audit.tag or '(unknown)'} "
        f"(auditwheel show: {audit.auditwheel_tag or '(no verdict)'})",
    ]
    lines += [f"  why not better: {r}" for r in audit.tag_reasons]
    lines += _cuda_text(audit.cuda)
    lines += [f"  {f.line()}" for f in (*audit.errors, *audit.violations)]
    lines += [f"  {f.line()}" for f in audit.warnings]
    for elf in audit.elfs:
        lines += _elf_text(elf)
    lines += _size_text(audit.size)
    s = audit.stats
    lines.append(
        f"  {s.members} members, {s.elf_members} ELF, {s.uncompressed_bytes / 1e6:.1f} MB "
        f"unpacked in {s.seconds:.2f} s ({s.cached_batches}/{s.batches} batches from cache)"
    )
    return "\n".join(lines)


def _elf_text(elf: ElfReport) -> list[str]:
    sym = elf.symbols
    head = f"  {elf.member} [{elf.kind}"
    head += f", SONAME {elf.soname}" if elf.soname else ""
    head += f", RUNPATH {elf.runpath}" if elf.runpath is not None else ""
    head += f", RPATH {elf.rpath}" if elf.rpath is not None else ""
    head += "]"
    lines = [head]
    for need in elf.needs:
        where = f" -> {need.where}" if need.where else ""
        lines.append(f"      {need.soname}: {need.kind}{where}")
    summary = f"      symbols: {sym.undefined} undefined, {sym.bound} bound"
    summary += f", {sym.python} from the interpreter" if sym.python else ""
    if sym.unverified:
        summary += (
            f", {len(sym.unverified)} unverified (not readable here: "
            f"{', '.join(sym.unverifiable_from) or 'unknown'})"
        )
    summary += f", {len(sym.missing)} MISSING" if sym.missing else ""
    lines.append(summary)
    if elf.device is not None:
        from wheels.cuda.devicecode import summary as device_summary

        lines.append(f"      CUDA device code: {device_summary(elf.device)}")
    if elf.cxx_runtime is not None:
        lines.append(f"      C++ runtime: {elf.cxx_runtime}")
    return lines


def _cuda_text(cuda: CudaReport | None) -> list[str]:
    if cuda is None:
        return []
    head = (
        f"  CUDA device code in {plural(cuda.elfs, 'ELF file')}: "
        f"SASS {', '.join(cuda.sass) or 'none'}; PTX {', '.join(cuda.ptx) or 'none'}"
    )
    runtime = (
        f"the CUDA {cuda.runtime} runtime ({cuda.runtime_from})"
        if cuda.runtime
        else "no declared CUDA runtime"
    )
    if not cuda.checked:
        return [head, "  CUDA architectures: not checked for this vendor"]
    if not cuda.architectures:
        archs = "none declared (give --cuda-arch or --manifest)"
    else:
        archs = ", ".join(cuda.architectures)
    return [head, f"  CUDA architectures: {archs}; checked against {runtime}"]


def _size_text(size: SizeReport | None) -> list[str]:
    if size is None:
        return []
    lines = [
        f"  size: {human_size(size.wheel_bytes)} ({human_size(size.unpacked)} unpacked); "
        f"limit {human_size(size.limit)} ({size.limit_from})",
        "  largest members: "
        + ", ".join(
            f"{m.member} {human_size(m.compressed)} ({human_size(m.unpacked)})"
            for m in size.largest
        ),
    ]
    for elf in size.device:
        per = ", ".join(
            f"{t} {human_size(stored)} ({human_size(unpacked)})"
            for t, stored, unpacked in elf.targets
        )
        lines.append(f"  device code of {elf.member}: {per}")
    return lines


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(audits: list[WheelAudit], *, symbols: bool = False) -> dict[str, Any]:
    """The full graph: every ELF, every need and where it resolved, every finding.

    ``symbols`` adds every ELF's defined and undefined dynamic symbol names.
    """
    return {
        "version": JSON_VERSION,
        "ok": all(a.ok for a in audits),
        "wheels": [_wheel_json(a, symbols) for a in audits],
    }


def _wheel_json(audit: WheelAudit, symbols: bool) -> dict[str, Any]:
    return {
        "path": audit.path,
        "ok": audit.ok,
        "vendor": audit.vendor,
        "distribution": audit.distribution,
        "version": audit.version,
        "declared_tags": list(audit.declared),
        "tag": audit.tag,
        "auditwheel_tag": audit.auditwheel_tag,
        "tag_reasons": list(audit.tag_reasons),
        "requires_dist": list(audit.requires),
        "errors": [_finding_json(f) for f in audit.errors],
        "violations": [_finding_json(f) for f in audit.violations],
        "warnings": [_finding_json(f) for f in audit.warnings],
        "elfs": [_elf_json(e, symbols) for e in audit.elfs],
        "cuda": _cuda_json(audit.cuda) if audit.cuda else None,
        "size": _size_json(audit.size) if audit.size else None,
        "stats": audit.stats.__dict__,
    }


def _finding_json(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "member": f.member, "message": f.message, "location": f.location}


def _elf_json(elf: ElfReport, symbols: bool) -> dict[str, Any]:
    sym = elf.symbols
    names = (
        {
            "symbol_names": {
                "defined": sorted(set(elf.defined_names.split("\0")) - {""}),
                "undefined": list(elf.undefined_names),
            }
        }
        if symbols
        else {}
    )
    return names | {
        "member": elf.member,
        "kind": elf.kind,
        "arch": elf.arch,
        "isa": elf.isa,
        "soname": elf.soname,
        "needed": list(elf.needed),
        "rpath": elf.rpath,
        "runpath": elf.runpath,
        "version_needs": {k: list(v) for k, v in elf.version_needs.items()},
        "version_defs": list(elf.version_defs),
        "exports": elf.exports,
        "needs": [{"soname": n.soname, "kind": n.kind, "where": n.where} for n in elf.needs],
        "symbols": {
            "undefined": sym.undefined,
            "bound": sym.bound,
            "python": sym.python,
            "unverified": list(sym.unverified),
            "unverifiable_from": list(sym.unverifiable_from),
            "missing": list(sym.missing),
        },
        "cuda": _device_json(elf.device) if elf.device is not None else None,
        "cxx_runtime": elf.cxx_runtime,
    }


def _cuda_json(cuda: CudaReport) -> dict[str, Any]:
    return {
        "elfs": cuda.elfs,
        "sass": list(cuda.sass),
        "ptx": list(cuda.ptx),
        "architectures": list(cuda.architectures),
        "runtime": cuda.runtime,
        "runtime_from": cuda.runtime_from,
        "checked": cuda.checked,
    }


def _size_json(size: SizeReport) -> dict[str, Any]:
    return {
        "bytes": size.wheel_bytes,
        "unpacked": size.unpacked,
        "limit": size.limit,
        "limit_from": size.limit_from,
        "largest": [
            {"member": m.member, "bytes": m.compressed, "unpacked": m.unpacked}
            for m in size.largest
        ],
        "device": [
            {
                "member": d.member,
                "targets": {t: {"bytes": b, "unpacked": u} for t, b, u in d.targets},
            }
            for d in size.device
        ],
    }


def _device_json(code: DeviceCode) -> dict[str, Any]:
    loaded = code.loaded()
    return {
        "sass": list(loaded.sass_archs),
        "ptx": list(loaded.ptx_archs),
        "sections": list(code.sections),
        "images": [
            {
                "kind": e.kind,
                "target": e.target,
                "ptx_isa": f"{e.ptx_version[0]}.{e.ptx_version[1]}" if e.ptx_version else None,
                "count": e.count,
                "bytes": e.size,
                "compression": e.compression,
                "relocatable": e.relocatable,
                "debug": e.debug,
            }
            for e in code.entries
        ],
    }


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def shorten(names: tuple[str, ...] | list[str], shown: int = _SHOWN) -> str:
    """``a, b, c and 12 more``: for messages that would otherwise list thousands of symbols."""
    head = ", ".join(names[:shown])
    return head + (f" and {len(names) - shown} more" if len(names) > shown else "")
