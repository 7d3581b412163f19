"""The platform a wheel's file name claims, as auditwheel reads it (mirrors
``auditwheel/wheeltools.py``: ``get_wheel_architecture`` and ``get_wheel_libc``)."""

from __future__ import annotations

from wheels.filename import InvalidWheelName, parse_wheel_filename
from wheels.policy.manylinux import ARCHITECTURES, baseline


def wheel_platform(wheel_name: str) -> tuple[str | None, str | None, bool]:
    """(baseline arch, libc, pure) from the file name, as auditwheel's wheeltools reads them."""
    try:
        _, _, _, tags = parse_wheel_filename(wheel_name)
    except InvalidWheelName:
        return None, None, False
    platforms = sorted({platform for _, _, platform in tags})
    archs: set[str] = set()
    missed, pure = False, True
    for plat in platforms:
        pure = pure and plat == "any"
        if plat == "any":
            missed = True
            continue
        hits = {baseline(a) for a in ARCHITECTURES if plat.endswith(f"_{a}")}
        archs |= hits
        missed = missed or not hits
    arch = archs.pop() if len(archs) == 1 and not missed else None
    libcs = {
        libc
        for plat in platforms
        for prefix, libc in (("manylinux", "glibc"), ("musllinux", "musl"), ("android", "android"))
        if plat.startswith(prefix)
    }
    return arch, (libcs.pop() if len(libcs) == 1 else None), pure and not archs
