"""noxfile.py: sessions per vendor read from the manifest, skipped with the preflight's reason
when the host lacks a provider (failed under INFINI_STACK_STRICT=1), arguments passed through."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import HAVE_NVCC, ROOT

pytestmark = pytest.mark.integration

PER_VENDOR = ("preflight", "build", "wheel", "audit", "release")


def nox(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nox", "--noxfile", str(ROOT / "noxfile.py"), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1", **env},
    )


def listed(output: str) -> dict[str, str]:
    """session -> description, from `nox -l`."""
    return dict(re.findall(r"^[*-] (\S+) -> (.+)$", output, flags=re.MULTILINE))


def test_nox_list_has_every_session_per_vendor_of_stack_yaml_with_a_description() -> None:
    done = nox("-l")
    assert done.returncode == 0, done.stderr
    sessions = listed(done.stdout)
    vendors = list(yaml.safe_load((ROOT / "stack.yaml").read_text())["vendors"])
    for vendor in vendors:
        for session in PER_VENDOR:
            assert f"{session}(vendor='{vendor}')" in sessions
    for name in ("tests", "lint", "typecheck", "demo", "matrix"):
        assert sessions[name]
    assert all(len(d) > 20 for d in sessions.values())


def test_vendor_sessions_follow_the_manifest_not_a_fixed_list(tmp_path: Path) -> None:
    manifest = tmp_path / "stack.yaml"
    manifest.write_text(
        "schema: 1\nvendors:\n  cpu: {}\n  ali:\n    ci: {runs-on: [x]}\ncomponents: {}\n"
    )
    sessions = listed(nox("-l", INFINI_STACK_MANIFEST=str(manifest)).stdout)
    assert {s for s in sessions if s.startswith("wheel(")} == {
        "wheel(vendor='cpu')",
        "wheel(vendor='thead')",
    }  # aliases are resolved


def broken_nvidia(mini: Path) -> Path:
    """The mini stack wanting a CUDA no host has: nvidia's preflight fails (exit 3)."""
    mini.write_text(mini.read_text().replace('cuda: ">=12.0"', 'cuda: ">=99.0"'))
    return mini


def test_vendor_session_is_skipped_with_the_preflight_reason_when_a_provider_is_missing(
    home: Path, mini: Path
) -> None:
    done = nox(
        "-s",
        "build(vendor='nvidia')",
        "--",
        "--manifest",
        broken_nvidia(mini),
        INFINI_STACK_HOME=str(home),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Session build\(vendor='nvidia'\) skipped: nvidia: .*cuda", done.stderr)
    assert not (home / "store").exists() or not any((home / "store").glob("*/record.json"))


def test_strict_mode_fails_the_session_instead_of_skipping(home: Path, mini: Path) -> None:
    done = nox(
        "-s",
        "preflight(vendor='nvidia')",
        "--",
        "--manifest",
        broken_nvidia(mini),
        INFINI_STACK_HOME=str(home),
        INFINI_STACK_STRICT="1",
    )
    assert done.returncode != 0
    assert "preflight failed (INFINI_STACK_STRICT is set)" in done.stderr


def test_arguments_after_the_double_dash_reach_the_command(shared_home: Path, mini: Path) -> None:
    done = nox(
        "-s",
        "build(vendor='cpu')",
        "--",
        "--manifest",
        mini,
        "--jobs",
        "1",
        INFINI_STACK_HOME=str(shared_home),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"build --vendor cpu --manifest {mini} --jobs 1" in done.stderr
    assert "Session build(vendor='cpu') was successful" in done.stderr


def test_matrix_session_prints_the_ci_matrix() -> None:
    done = nox("-s", "matrix")
    assert done.returncode == 0, done.stderr
    assert '"session": "release(vendor=\'cpu\')"' in done.stdout


@pytest.mark.slow
def test_demo_builds_packages_audits_and_imports_the_mini_stack(
    shared_home: Path, tmp_path: Path
) -> None:
    done = nox(
        "-s", "demo", INFINI_STACK_HOME=str(shared_home), INFINI_STACK_DIST=str(tmp_path / "dist")
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "smoke passed" in done.stdout
    vendors = sorted(p.name for p in (tmp_path / "dist" / "demo").iterdir())
    assert vendors == (["cpu", "nvidia"] if HAVE_NVCC else ["cpu"])
    assert all(len(list((tmp_path / "dist" / "demo" / v).glob("*.whl"))) == 1 for v in vendors)
