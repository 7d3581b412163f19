"""`release` from a plain ``pip install .``: no dev extras, nothing inherited from the venv
the tests run in. What the release gate needs (SBOM validation, signing) must come with the
install itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.checks.venv import make as make_venv

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plain_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees nothing but what ``pip install .`` of this checkout brought."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    python = make_venv(venv, sys.executable, inherit=False)
    subprocess.run(
        [python, "-m", "ensurepip", "--upgrade", "--default-pip"],
        check=True,
        capture_output=True,
    )
    result = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"pip install . failed:\n{result.stdout}\n{result.stderr}")
    return venv / "bin"


def test_release_runs_whole_from_a_plain_install(
    plain_bin: Path, mini: Path, tmp_path: Path
) -> None:
    out = tmp_path / "release"
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PATH"] = f"{plain_bin}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [
            plain_bin / "infini-stack",
            "release",
            "--manifest",
            mini,
            "--vendor",
            "cpu",
            "--home",
            tmp_path / "home",
            "-o",
            out,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads((out / "release-report.json").read_text())
    assert report["ok"] is True and report["steps"]["sbom"]["ok"] is True
    assert list(out.glob("*.cdx.json"))
