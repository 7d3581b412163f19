"""What a fresh venv inherits from a target interpreter that is itself a venv
(builder.checks.venv): its site directories, never the standard library's."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from builder.checks import venv

pytestmark = pytest.mark.integration


def test_a_venv_targets_site_directories_hold_no_standard_library_directory(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", target], check=True)
    python = str(target / "bin" / "python")
    dirs = venv.site_dirs(python)
    own = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert own in dirs
    stdlib = Path(sysconfig.get_path("stdlib")).resolve()
    # (pip 26 takes what a site directory's .pth adds out of its build environments: a
    # lib-dynload there leaves the build backend without math)
    assert not [d for d in dirs if Path(d).resolve().is_relative_to(stdlib)], dirs
