"""The vendor's runtime check: its script run against the installed wheel, on the vendor's device.

``stack.yaml`` names per vendor a Python script kept in the repository (``vendors.<v>.check``).
The wheel is installed, without its dependencies, into a fresh virtual environment that sees
what an install into the target interpreter would see (:mod:`builder.checks.venv`); the script
runs there from an empty directory, and passes by exiting 0. It finds the wheel and vendor in
``INFINI_STACK_CHECK_WHEEL`` and ``INFINI_STACK_CHECK_VENDOR``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from builder.checks import venv
from builder.core import proc
from builder.core.errors import EXIT_CHECK, CommandFailed
from builder.vendors.base import Vendor

TIMEOUT = 1800.0  # seconds: the nvidia check builds a model and generates several times


@dataclass(frozen=True)
class Device:
    present: bool
    what: str  # the device found, or why none was


def find_device(vendor: Vendor, env: dict[str, str] | None = None) -> Device:
    """The vendor's device on this host, by the vendor's own listing command."""
    if not vendor.device_command:
        return Device(True, "the host")
    tool, *args = vendor.device_command
    path = proc.which(tool, (env or os.environ).get("PATH"))
    if path is None:
        return Device(False, f"no {vendor.name} device: {tool} not found")
    try:
        result = proc.run([path, *args], check=False, timeout=30, env=env)
    except CommandFailed as exc:
        return Device(False, f"no {vendor.name} device: {tool}: {exc.message}")
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        why = lines[-1] if lines else f"exit status {result.returncode}"
        return Device(False, f"no {vendor.name} device: {Path(tool).name}: {why}")
    return Device(True, lines[0])


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    script: Path
    output: str
    seconds: float
    returncode: int

    def render(self) -> str:
        verdict = "passed" if self.ok else f"FAILED (exit status {self.returncode})"
        return f"check {self.script.name}: {verdict} in {self.seconds:.1f}s"


def run_check(wheel: Path, vendor: str, script: Path, python: str) -> CheckResult:
    """Install ``wheel`` into a fresh venv seeing ``python``'s packages, run ``script`` there."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="infini-check-") as tmp:
        work = Path(tmp)
        interpreter = venv.install(wheel, venv.make(work / "venv", python), work)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(
            {
                "PYTHONNOUSERSITE": "1",
                "PYTHONUNBUFFERED": "1",
                "INFINI_STACK_CHECK_WHEEL": str(wheel.resolve()),
                "INFINI_STACK_CHECK_VENDOR": vendor,
            }
        )
        result = proc.run(
            [str(interpreter), str(script)],
            cwd=work,
            env=env,
            check=False,
            timeout=TIMEOUT,
            exit_code=EXIT_CHECK,
        )
    return CheckResult(
        ok=result.returncode == 0,
        script=script,
        output=result.output,
        seconds=time.monotonic() - start,
        returncode=result.returncode,
    )
