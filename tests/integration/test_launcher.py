"""The installed ``infini-stack`` command: this checkout pip-installed into a fresh venv, then a
real build of the mini stack's runtime through the shell launcher, the full path and the fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.checks.venv import make as make_venv
from builder.cli import RUN
from tests.conftest import ROOT, last_report

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding a regular (not editable) install of this checkout; its bin directory."""
    venv = tmp_path_factory.mktemp("launcher") / "venv"
    make_venv(venv, sys.executable)  # sees this interpreter's packages, a venv's too
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
        check=True,
        cwd=venv,
    )
    time.sleep(1.1)  # the memo does not trust files younger than a second
    return venv / "bin"


def run(tool: Path, *args: str | Path, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INFINI_STACK_HOME": str(home)}
    argv = [str(tool), *(str(a) for a in args)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def test_the_installed_command_is_the_shell_launcher(installed: Path) -> None:
    tool = installed / "infini-stack"
    assert tool.read_bytes().startswith(b"#!/bin/sh\n")
    assert os.access(tool, os.X_OK)


def test_installed_build_takes_the_full_path_then_the_fast_path(
    installed: Path, home: Path, mini: Path, tmp_path: Path
) -> None:
    tool = installed / "infini-stack"
    argv = ("build", "--manifest", mini, "--vendor", "cpu", "--component", "minirt")
    time.sleep(1.1)  # the mini stack copy was just written: let the memo trust it
    first = run(tool, *argv, cwd=tmp_path, home=home)
    assert first.returncode == 0, first.stderr
    assert not last_report(home)["fast_path"] and last_report(home)["totals"]["built"] == 1
    assert "run report:" in first.stderr

    second = run(tool, *argv, cwd=tmp_path, home=home)
    assert second.returncode == 0, second.stderr
    report = last_report(home)
    assert report["fast_path"] and report["totals"]["hit"] == 1
    assert "cpu: 0 built, 1 from the store, 0 failed in" in second.stderr

    # The launcher started Python without site for that check; anything else (here a command
    # that is not a build) runs again with site and its dependencies.
    plan = run(tool, "plan", "--manifest", mini, "--vendor", "cpu", cwd=tmp_path, home=home)
    assert plan.returncode == 0, plan.stderr
    assert "minirt" in plan.stdout


def test_a_checkout_in_the_working_directory_does_not_stand_in_for_the_install(
    installed: Path, home: Path, tmp_path: Path
) -> None:
    shadow = tmp_path / "builder"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise SystemExit('the working directory was imported')\n")
    result = run(installed / "infini-stack", "--version", cwd=tmp_path, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("infini-stack ")


def test_installed_audit_starts_again_with_site_when_its_modules_are_only_there(
    installed: Path, home: Path, tmp_path: Path
) -> None:
    # This venv reaches packaging through a .pth file, which only site reads: the launcher's
    # start without site finds no packaging, and the audit runs again with site.
    from tests.wheelmaker import make_wheel

    wheel = make_wheel(tmp_path / "w", {"demo/__init__.py": b"", "demo/data.txt": b"x"})
    argv = ("audit", "--json", "--no-cache", str(wheel))
    result = run(installed / "infini-stack", *argv, cwd=tmp_path, home=home)
    assert result.returncode in (0, 6), result.stderr
    assert "Traceback" not in result.stderr
    direct = subprocess.run(
        [installed / "python", "-c", RUN, *argv],
        cwd=tmp_path,
        env={**os.environ, "INFINI_STACK_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )

    def verdict(out: str) -> dict[str, object]:
        audit: dict[str, object] = json.loads(out)["wheels"][0]
        audit.pop("stats")  # timings
        return audit

    assert direct.returncode == result.returncode
    assert verdict(direct.stdout) == verdict(result.stdout)
    assert verdict(result.stdout)["path"] == str(wheel)
