"""The size budget: how big the wheel is, its largest members, each ELF's device code per CUDA
target, and the ``wheel-size`` finding.

A wheel over the limit given (stack.yaml's ``wheel.max_size``, ``--max-size``) is a violation;
without one, a wheel over PyPI's default upload limit (100 MB a file; a project may ask PyPI
for more) is a warning. Every CUDA architecture added grows the fat binaries, so the device
code is listed per target.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from wheels.audit.archive import Archive, is_member_file
from wheels.audit.findings import Findings
from wheels.audit_report import DeviceSize, MemberSize, SizeReport
from wheels.sizes import PYPI_MAX_SIZE, human_size

if TYPE_CHECKING:
    from wheels.cuda.fatbin import DeviceCode

CODE = "wheel-size"
LARGEST = 5  # members listed
PYPI_LIMIT = "PyPI's default upload limit"


def check_size(
    archive: Archive,
    devices: dict[str, DeviceCode],
    max_size: int | None,
    f: Findings,
) -> SizeReport:
    """The wheel's size report; a ``wheel-size`` finding when it is over the limit."""
    files = [i for i in archive.infos if is_member_file(i)]
    ranked = sorted(files, key=lambda i: (-i.compress_size, i.filename))[:LARGEST]
    report = SizeReport(
        wheel_bytes=os.stat(archive.path).st_size,
        unpacked=sum(i.file_size for i in files),
        limit=max_size if max_size is not None else PYPI_MAX_SIZE,
        limit_from="wheel.max_size / --max-size" if max_size is not None else PYPI_LIMIT,
        largest=tuple(MemberSize(i.filename, i.compress_size, i.file_size) for i in ranked),
        device=tuple(device_size(m, devices[m]) for m in sorted(devices)),
    )
    if report.wheel_bytes > report.limit:
        largest = ", ".join(f"{m.member} ({human_size(m.compressed)})" for m in report.largest)
        message = (
            f"the wheel is {human_size(report.wheel_bytes)}, over {human_size(report.limit)} "
            f"({report.limit_from}); its largest members: {largest}"
        )
        if max_size is not None:
            f.violation(CODE, None, message)
        else:
            f.warning(CODE, None, message + " (give wheel.max_size or --max-size to set one)")
    return report


def device_size(member: str, code: DeviceCode) -> DeviceSize:
    """The device code the CUDA runtime loads from ``member``, summed per target."""
    totals: dict[str, tuple[int, int]] = {}
    for entry in code.loaded().entries:
        stored, unpacked = totals.get(entry.target, (0, 0))
        totals[entry.target] = (stored + entry.size, unpacked + entry.uncompressed_size)
    return DeviceSize(member, tuple((t, *totals[t]) for t in sorted(totals, key=_target_order)))


def _target_order(target: str) -> tuple[bool, str]:
    """SASS before PTX, then by number: sm_80, sm_86, sm_90, compute_90."""
    kind, _, arch = target.partition("_")
    digits = "".join(c for c in arch if c.isdigit())
    return (kind != "sm", f"{int(digits or 0):04d}{arch}")
