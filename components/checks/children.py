"""What the runtime check scripts share: their JSON lines, and the child processes that every
infinicore/InfiniLM call runs in (so that an abort is a reported outcome, not the end of the
check).

Standard library only, imported from beside the script (as ``goodness.py``), in a venv that holds
nothing but the wheel and the target interpreter's packages.

A script calls :func:`emit` once per case and reads :data:`FAILED`, :data:`GAPS` and
:data:`NOT_RUN` for its summary. ``python SCRIPT --child MODE SPEC`` runs one child: the script
hands its modes to :func:`serve`, which prints the mode's results as ``RESULT {json}`` lines;
:func:`run_child` starts it and reads the last one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

FAILED: list[str] = []  # required cases that failed
GAPS: list[str] = []  # reported, not required: what is known not to run yet
NOT_RUN: list[str] = []  # cases this host cannot run: never a pass

Result = Callable[[dict[str, Any]], None]
Mode = Callable[[dict[str, Any], Result], None]


def emit(check: str, ok: bool, *, gap: str | None = None, **info: Any) -> None:
    """One case's line; a failure counts unless ``gap`` names it as a known gap."""
    if not ok:
        (GAPS if gap else FAILED).append(check)
    extra = {"required": False, "gap": gap} if gap and not ok else {}
    print(json.dumps({"check": check, "ok": ok, **extra, **info}, default=str), flush=True)


def not_run(check: str, why: str) -> None:
    """A case this host cannot run: its plain line, and a JSON line that is no pass."""
    NOT_RUN.append(check)
    print(f"{check}: not run ({why})", flush=True)
    print(json.dumps({"check": check, "ok": False, "required": False, "not_run": why}), flush=True)


def run_child(
    script: str,
    mode: str,
    spec: dict[str, Any],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    tail: int = 800,
    annotate: Callable[[str], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``python SCRIPT --child MODE SPEC``: its last RESULT line, how it ended (``outcome``),
    its ``seconds``, and its stderr's last ``tail`` characters when it did not end well.
    ``annotate`` adds what it reads from the child's output (stdout, then stderr)."""
    argv = [sys.executable, script, "--child", mode, json.dumps(spec)]
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    child_env.update(env or {})
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=child_env, check=False
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"timed out after {timeout:g}s"}
    lines = done.stdout.splitlines()
    results = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
    if done.returncode < 0:
        outcome = f"killed by {signal.Signals(-done.returncode).name}"
    else:
        outcome = "ok" if done.returncode == 0 else f"exit status {done.returncode}"
    out = {"outcome": outcome, **(results[-1] if results else {})}
    out["seconds"] = round(time.monotonic() - start, 1)
    if annotate is not None:
        out.update(annotate(done.stdout + "\n" + done.stderr))
    if outcome != "ok":
        out["stderr_tail"] = done.stderr[-tail:]
    return out


def serve(modes: Mapping[str, Mode], mode: str, spec: dict[str, Any], *, tail: int = 800) -> int:
    """The child's side: run ``modes[mode]``, which reports through ``RESULT`` lines; any
    exception is reported as a result too (exit status 3), for the parent to judge."""

    def result(data: dict[str, Any]) -> None:
        print("RESULT " + json.dumps(data, default=str), flush=True)

    try:
        modes[mode](spec, result)
    except BaseException as exc:  # everything is reported: the parent decides
        result({"exception": type(exc).__name__, "message": str(exc)[:tail]})
        return 3
    return 0
