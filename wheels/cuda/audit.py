"""The CUDA device code of a wheel's ELF files: listed for every vendor, and for NVIDIA wheels
checked against the CUDA architectures the stack declares and the CUDA runtime the wheel
declares (:mod:`wheels.cuda.arch`).

The declared runtime is the wheel's own word: its local version (``+cu130`` is CUDA 13.0), else
the lowest version its Requires-Dist on ``nvidia-cuda-runtime`` (or ``-cu12``...) admits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from packaging.version import InvalidVersion, Version

from wheels.audit_report import CudaReport
from wheels.cuda.arch import (
    Capability,
    CudaArchError,
    check_architectures,
    check_device_code,
    parse_arch,
)
from wheels.cuda.devicecode import NO_SECTIONS
from wheels.cuda.fatbin import DeviceCode, combine
from wheels.filename import canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from packaging.requirements import Requirement


# What the checks read of wheels.audit's Archive, Requires and Findings (wheels.audit imports
# this module, so it does not import them).
class Requires(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...

    def parsed(self) -> Requirement: ...


class Archive(Protocol):
    @property
    def version(self) -> str | None: ...

    @property
    def requires(self) -> Sequence[Requires]: ...


class Findings(Protocol):
    def violation(self, code: str, member: str | None, message: str) -> None: ...

    def warning(self, code: str, member: str | None, message: str) -> None: ...


_RUNTIME_DIST = "nvidia-cuda-runtime"
_LOWER_BOUNDS = (">=", "==", "~=", "===", ">")
CHECKED_VENDOR = "nvidia"


def declared_runtime(archive: Archive) -> tuple[Capability, str] | None:
    """The CUDA runtime the wheel declares, and where it says so."""
    # (the version is normalized: its local part is what follows "+", as Version(...).local)
    local = archive.version.partition("+")[2] or None if archive.version is not None else None
    if local and (version := local_runtime(local)) is not None:
        return version, f"local version +{local}"
    found = [(v, r.text) for r in archive.requires if (v := required_runtime(r)) is not None]
    return min(found) if found else None


def local_runtime(local: str) -> Capability | None:
    """``cu130`` (a local version, or one of its dot-separated parts) is CUDA 13.0."""
    for part in local.lower().split("."):  # each as ^cu(\d{1,2})(\d)$ takes it
        digits = part[2:].removesuffix("\n")
        if part.startswith("cu") and 2 <= len(digits) <= 3 and digits.isdecimal():
            return int(digits[:-1]), int(digits[-1])
    return None


def required_runtime(req: Requires) -> Capability | None:
    """The lowest CUDA runtime a Requires-Dist on nvidia-cuda-runtime admits: ``>=13`` is 13.0,
    ``nvidia-cuda-runtime-cu12==12.4.127`` is 12.4, a bare ``-cu12`` 12.0; None for another
    distribution or no lower bound."""
    name = canonicalize_name(req.name).removesuffix("\n")  # ^nvidia-cuda-runtime(?:-cu(\d+))?$
    major = name[len(_RUNTIME_DIST) + 3 :] if name.startswith(_RUNTIME_DIST + "-cu") else ""
    if name != _RUNTIME_DIST and not major.isdecimal():
        return None

    lows: list[Capability] = []
    for spec in req.parsed().specifier:  # (packaging, for a line on the runtime only)
        if spec.operator not in _LOWER_BOUNDS:
            continue
        try:
            release = Version(spec.version.rstrip(".*")).release
        except InvalidVersion:
            continue
        lows.append((release[0], release[1] if len(release) > 1 else 0))
    if lows:
        return min(lows)
    return (int(major), 0) if major else None


def check_cuda(
    archive: Archive,
    devices: Mapping[str, DeviceCode],
    errors: Mapping[str, str],
    vendor: str,
    architectures: Sequence[str] | None,
    f: Findings,
) -> CudaReport | None:
    """Findings for every ELF's device code; the wheel's CUDA summary (None without any)."""
    for member, error in sorted(errors.items()):
        if error.startswith(NO_SECTIONS):  # read as ld.so reads it (wheels.elf.loaderview)
            f.warning("section-table", member, error)
        else:
            f.violation("cuda-fatbin", member, error)
    if not devices:
        return None
    declared = tuple(architectures or ())
    runtime = declared_runtime(archive)
    checked = vendor == CHECKED_VENDOR
    if checked:
        valid = _valid(declared, f)
        for member, code in sorted(devices.items()):
            _check_one(member, code, valid, runtime, f)
        if runtime is None:
            f.warning(
                "cuda-runtime",
                None,
                "the wheel declares no CUDA runtime (no +cuXY local version, no Requires-Dist "
                "on nvidia-cuda-runtime), so its PTX was not checked against a driver",
            )
    loaded = combine(code.loaded() for code in devices.values())
    return CudaReport(
        elfs=len(devices),
        sass=loaded.sass_archs,
        ptx=loaded.ptx_archs,
        architectures=declared if checked else (),
        runtime=f"{runtime[0][0]}.{runtime[0][1]}" if runtime else None,
        runtime_from=runtime[1] if runtime else None,
        checked=checked,
    )


def _valid(declared: Sequence[str], f: Findings) -> tuple[str, ...]:
    valid = []
    for text in declared:
        try:
            parse_arch(text)
        except CudaArchError as exc:
            f.violation("cuda-arch", None, f"declared architectures: {exc}")
            continue
        valid.append(text)
    return tuple(valid)


def _check_one(
    member: str,
    code: DeviceCode,
    architectures: Sequence[str],
    runtime: tuple[Capability, str] | None,
    f: Findings,
) -> None:
    if runtime is None:
        found = check_architectures(code, architectures)
    else:
        found = check_device_code(code, architectures, runtime[0])
    for finding in found:
        if finding.severity == "violation":
            f.violation("cuda-arch", member, f"its kernels fail to launch: {finding.message}")
        else:
            f.warning("cuda-ptx", member, finding.message)
