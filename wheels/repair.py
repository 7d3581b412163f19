"""Repair a wheel to a manylinux tag with auditwheel, never grafting what the vendor supplies.

``auditwheel repair`` decides the most compatible manylinux tag and grafts any library outside
its whitelist into the wheel. A vendor's driver (libcuda.so.1, the MUSA libraries ...) must never
be grafted, nor the libraries other distributions supply (libcudart.so.13 from
nvidia-cuda-runtime): both lists come from ``wheels/policy/vendors.json`` and are passed as
``--exclude``. The repaired tree is then packed again by :func:`wheels.assemble.pack`, so the
result keeps our member order, times and modes, and its SBOM describes the files it holds.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from packaging.utils import parse_wheel_filename

from builder.core import proc
from builder.core.errors import EXIT_AUDIT, AuditError, CommandFailed


def never_graft(external: Iterable[str], distributions: Iterable[str]) -> list[str]:
    """The ``--exclude`` patterns: the vendor's external libraries, then distributions' ones."""
    return list(dict.fromkeys([*external, *distributions]))


def repair(wheel: Path, out_dir: Path, exclude: Sequence[str], *, epoch: int) -> Path:
    """Run ``auditwheel repair``; returns the repaired wheel written into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out_dir)]
    for pattern in exclude:
        argv += ["--exclude", pattern]
    argv.append(str(wheel))
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}  # auditwheel's zip times
    try:
        proc.run(argv, what="auditwheel repair", env=env, exit_code=EXIT_AUDIT, timeout=1800)
    except CommandFailed as exc:
        raise AuditError(
            f"auditwheel cannot repair {wheel.name} to a manylinux tag:\n{exc.tail}",
            hint="the libraries it names must be bundled by the stack, listed in the vendor's "
            "policy (wheels/policy/vendors.json), or the wheel kept with its linux tag",
        ) from exc
    made = sorted(out_dir.glob("*.whl"))
    if len(made) != 1:
        raise AuditError(f"auditwheel repair wrote {len(made)} wheels into {out_dir}, not one")
    return made[0]


def platform_tag(wheel: Path) -> str:
    """The (possibly compressed, dotted) platform tag of a wheel's file name."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    return ".".join(sorted({t.platform for t in tags}))


def unpack_payload(wheel: Path, root: Path) -> list[str]:
    """Extract everything but the .dist-info directory into ``root``; returns the member names.

    Modes are kept (the executable bit is all a wheel's modes carry); a member that would land
    outside ``root`` is refused.
    """
    names: list[str] = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = PurePosixPath(info.filename).parts
            if info.is_dir() or not parts or parts[0].endswith(".dist-info"):
                continue
            if info.filename.startswith("/") or ".." in parts:
                raise AuditError(f"{wheel.name}: member {info.filename!r} escapes the wheel")
            target = root.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            mode = (info.external_attr >> 16) & 0o777
            target.chmod(0o755 if mode & 0o100 else 0o644)
            names.append(info.filename)
    return names


def grafted(names: Iterable[str]) -> list[str]:
    """Members auditwheel grafted: files under a top-level ``*.libs`` directory."""
    return [n for n in names if PurePosixPath(n).parts[0].endswith(".libs")]
