"""The platform-tag verdict against ``auditwheel show`` itself, wheel by wheel.

Every wheel the tests build goes through both; so do real wheels named by
``$INFINI_STACK_REAL_WHEELS`` (files or directories, separated like PATH).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.wheelmaker import auditwheel_tag, corpus, have_gcc
from wheels.audit import audit_wheel, infer_vendor
from wheels.policy import load_vendor_policy

pytestmark = pytest.mark.integration

REAL_WHEELS_ENV = "INFINI_STACK_REAL_WHEELS"
REAL_MAX_MB = float(os.environ.get("INFINI_STACK_REAL_WHEELS_MAX_MB", "60"))


def verdicts(wheels: list[Path]) -> dict[Path, str | None]:
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(wheels, pool.map(auditwheel_tag, wheels), strict=True))


@pytest.mark.skipif(not have_gcc(), reason="gcc is not installed")
def test_platform_tag_equals_auditwheel_show_on_every_built_wheel(tmp_path: Path) -> None:
    built = corpus(tmp_path)
    theirs = verdicts(list(built.wheels.values()))
    compared = 0
    for label, wheel in built.wheels.items():
        ours = audit_wheel(wheel, load_vendor_policy(infer_vendor(wheel)))
        if theirs[wheel] is None:
            continue
        compared += 1
        assert ours.auditwheel_tag == theirs[wheel], label
    assert compared >= len(built.wheels) - 3, f"auditwheel judged only {compared} wheels"


def real_wheels() -> list[Path]:
    found: list[Path] = []
    for entry in filter(None, os.environ.get(REAL_WHEELS_ENV, "").split(os.pathsep)):
        path = Path(entry)
        found += sorted(path.glob("*.whl")) if path.is_dir() else [path]
    return [p for p in found if p.is_file() and p.stat().st_size <= REAL_MAX_MB * 1e6]


@pytest.mark.skipif(
    not real_wheels(),
    reason=f"no real wheels: set {REAL_WHEELS_ENV} to wheel files or directories (e.g. "
    "from `pip download --no-deps --only-binary=:all: pyyaml nvidia-cuda-runtime`); wheels "
    f"over {REAL_MAX_MB:.0f} MB are left to benchmarks/audit_vs_auditwheel.py",
)
def test_platform_tag_equals_auditwheel_show_on_real_wheels() -> None:
    wheels = real_wheels()
    theirs = verdicts(wheels)
    judged = [w for w in wheels if theirs[w] is not None]
    assert judged, "auditwheel gave no verdict on any of the real wheels"
    for wheel in judged:
        ours = audit_wheel(wheel, load_vendor_policy(infer_vendor(wheel)))
        assert ours.auditwheel_tag == theirs[wheel], wheel.name
