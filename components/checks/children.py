"""What the runtime check scripts share: their JSON lines, and the child processes that every
infinicore/InfiniLM call runs in (so that an abort is a reported outcome, not the end of the
check), side by side.

Standard library only, imported from beside the script (as ``goodness.py``), in a venv that holds
nothing but the wheel and the target interpreter's packages.

A script calls :func:`emit` once per case and reads :data:`FAILED`, :data:`GAPS` and
:data:`NOT_RUN` for its summary. ``python SCRIPT --child MODE SPEC`` runs one child: the script
hands its modes to :func:`serve`, which prints the mode's results as ``RESULT {json}`` lines;
:func:`run_child` starts it and reads the last one.

Children run side by side: :func:`side_by_side` runs a script's groups of cases each in a thread
of its own, and every child takes a slot of one pool (:func:`pool`) of ``jobs`` slots; a child
``alone=True`` (two ranks, anything timing-sensitive) waits until it is the only one and holds
the others back meanwhile. Each group's lines are kept apart and printed whole, in the order the
groups were given, so the output (and the report drawn from it) is the same whatever finished
first. ``INFINI_STACK_CHECK_JOBS`` (``infini-stack check --check-jobs N``) sizes the pool;
otherwise the script does, from its device's memory and the host's cores (:func:`jobs_for`).
With one job every group runs in turn in the script's own thread: the serial check.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

FAILED: list[str] = []  # required cases that failed
GAPS: list[str] = []  # reported, not required: what is known not to run yet
NOT_RUN: list[str] = []  # cases this host cannot run: never a pass
JOBS_ENV = "INFINI_STACK_CHECK_JOBS"
_TIMELINE: list[dict[str, Any]] = []  # every child run: what, when, how long, how it ended

Result = Callable[[dict[str, Any]], None]
Mode = Callable[[dict[str, Any], Result], None]


# --- what a group of cases prints, kept apart while groups run side by side --------------------


class _Lines:
    """One group's output and tallies, printed and counted when its turn comes."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.failed: list[str] = []
        self.gaps: list[str] = []
        self.not_run: list[str] = []

    def flush(self) -> None:
        for line in self.lines:
            _print(line)
        _tally(self.failed, self.gaps, self.not_run)


_local = threading.local()


def _group() -> _Lines | None:
    found: _Lines | None = getattr(_local, "lines", None)
    return found


def _print(line: str) -> None:
    group = _group()
    if group is None:
        print(line, flush=True)
    else:
        group.lines.append(line)


def _tally(failed: list[str], gaps: list[str], not_run: list[str]) -> None:
    group = _group()
    into = (FAILED, GAPS, NOT_RUN) if group is None else (group.failed, group.gaps, group.not_run)
    for target, names in zip(into, (failed, gaps, not_run), strict=True):
        target.extend(names)


def emit(check: str, ok: bool, *, gap: str | None = None, **info: Any) -> None:
    """One case's line; a failure counts unless ``gap`` names it as a known gap."""
    if not ok:
        _tally([] if gap else [check], [check] if gap else [], [])
    extra = {"required": False, "gap": gap} if gap and not ok else {}
    _print(json.dumps({"check": check, "ok": ok, **extra, **info}, default=str))


def not_run(check: str, why: str) -> None:
    """A case this host cannot run: its plain line, and a JSON line that is no pass."""
    _tally([], [], [check])
    _print(f"{check}: not run ({why})")
    _print(json.dumps({"check": check, "ok": False, "required": False, "not_run": why}))


def side_by_side(*groups: Callable[[], object]) -> None:
    """Run ``groups`` (each emits its cases) at the same time, each in a thread whose lines are
    kept apart, then print each group's lines whole in the order given; an exception of a
    group is raised once all have ended. With one job, each runs in turn, printing as it goes."""
    if pool().jobs == 1 or len(groups) < 2:
        for group in groups:
            group()
        return
    outputs = [_Lines() for _ in groups]
    errors: list[BaseException | None] = [None] * len(groups)

    def run(i: int) -> None:
        _local.lines = outputs[i]
        try:
            groups[i]()
        except BaseException as exc:  # raised in the caller's thread below
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(groups))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for output in outputs:
        output.flush()
    raised = next((e for e in errors if e is not None), None)
    if raised is not None:
        raise raised


# --- the pool: how many children at once -------------------------------------------------------


class Pool:
    """At most ``jobs`` children at once; a child that must be alone waits for the others to end
    and holds back those not started yet."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._cond = threading.Condition()
        self._running = 0
        self._alone_waiting = 0
        self._alone = False

    @contextlib.contextmanager
    def slot(self, *, alone: bool = False) -> Iterator[None]:
        with self._cond:
            if alone:
                self._alone_waiting += 1
                self._cond.wait_for(lambda: self._running == 0 and not self._alone)
                self._alone_waiting -= 1
                self._alone = True
            else:
                self._cond.wait_for(self._free)
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._alone = self._alone and not alone
                self._cond.notify_all()

    def _free(self) -> bool:
        return not self._alone and not self._alone_waiting and self._running < self.jobs


def jobs_for(*, device_bytes: int | None, child_bytes: int, cores: int | None = None) -> int:
    """``INFINI_STACK_CHECK_JOBS`` when set; else as many children as the host's cores, the
    host's available memory and ``device_bytes`` (the device's free memory; None: the host is
    the device) each hold at ``child_bytes`` a child."""
    given = os.environ.get(JOBS_ENV, "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    limits = [cores or os.cpu_count() or 1, available_memory() // child_bytes]
    if device_bytes is not None:
        limits.append(device_bytes // child_bytes)
    return max(1, min(limits))


def available_memory() -> int:
    """The host's available memory in bytes (``MemAvailable``), or a large number unknown."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 1 << 50


_pool: list[Pool] = []


def pool(jobs: int | None = None) -> Pool:
    """The script's one pool: made by the first call (``jobs``, else :data:`JOBS_ENV`, else
    one a core), the same afterwards."""
    if not _pool:
        if jobs is None:
            jobs = jobs_for(device_bytes=None, child_bytes=1 << 30)
        _pool.append(Pool(jobs))
    return _pool[0]


# --- one child -----------------------------------------------------------------------------------


def run_child(
    script: str,
    mode: str,
    spec: dict[str, Any],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    tail: int = 800,
    annotate: Callable[[str], dict[str, Any]] | None = None,
    alone: bool = False,
) -> dict[str, Any]:
    """``python SCRIPT --child MODE SPEC`` in a slot of the pool (the only one running when
    ``alone``): its last RESULT line, how it ended (``outcome``), its ``seconds``, and its
    stderr's last ``tail`` characters when it did not end well. ``annotate`` adds what it reads
    from the child's output (stdout, then stderr)."""
    argv = [sys.executable, script, "--child", mode, json.dumps(spec)]
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    child_env.update(env or {})
    with pool().slot(alone=alone):
        start, began = time.monotonic(), time.time()
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, env=child_env, check=False
            )
        except subprocess.TimeoutExpired:
            _ran(mode, spec, began, time.monotonic() - start, f"timed out after {timeout:g}s")
            return {"outcome": f"timed out after {timeout:g}s"}
        elapsed = time.monotonic() - start
    lines = done.stdout.splitlines()
    results = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
    if done.returncode < 0:
        outcome = f"killed by {signal.Signals(-done.returncode).name}"
    else:
        outcome = "ok" if done.returncode == 0 else f"exit status {done.returncode}"
    _ran(mode, spec, began, elapsed, outcome)
    _log_child(mode, spec, outcome, elapsed, done.stdout, done.stderr)
    out = {"outcome": outcome, **(results[-1] if results else {})}
    out["seconds"] = round(elapsed, 1)
    if annotate is not None:
        out.update(annotate(done.stdout + "\n" + done.stderr))
    if outcome != "ok":
        out["stderr_tail"] = done.stderr[-tail:]
    return out


_LOG_LOCK = threading.Lock()
CHILD_MARK = "| "  # begins every line of a child's own output in the check's log


def _log_child(
    mode: str, spec: Mapping[str, Any], outcome: str, seconds: float, stdout: str, stderr: str
) -> None:
    """The child's whole output (but its RESULT lines) on the script's standard error, which the
    check's log keeps: one block per child, written at once, so children running side by side
    never interleave. Its lines begin with :data:`CHILD_MARK`, never read as a case's line."""
    lines = [line for line in stdout.splitlines() if not line.startswith("RESULT ")]
    lines += stderr.splitlines()
    if not lines:
        return
    head = f"child {_name(mode, spec)}: {outcome} in {seconds:.1f}s, its output:"
    block = "\n".join([head, *(CHILD_MARK + line for line in lines)]) + "\n"
    with _LOG_LOCK:
        sys.stderr.write(block)
        sys.stderr.flush()


def _name(mode: str, spec: Mapping[str, Any]) -> str:
    said = [
        f"{k}={v}" for k, v in spec.items() if isinstance(v, (str, int, float)) and k != "model"
    ]
    return " ".join([mode, *said])[:80]


def _ran(mode: str, spec: Mapping[str, Any], began: float, seconds: float, outcome: str) -> None:
    _TIMELINE.append(
        {
            "child": _name(mode, spec),
            "start": round(began, 6),
            "seconds": round(seconds, 6),
            "outcome": outcome,
        }
    )


def timeline() -> dict[str, Any]:
    """For the summary line: the pool's size and every child run (``report --trace`` draws
    them as lanes)."""
    return {"jobs": pool().jobs, "children": sorted(_TIMELINE, key=lambda c: c["start"])}


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


def once(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` called once per arguments, its result shared by every group's thread (the
    tiny model, transformers' reference): a lock makes the others wait for the first call."""
    cached = functools.lru_cache(maxsize=None)(function)
    lock = threading.Lock()

    @functools.wraps(function)
    def shared(*args: Any) -> Any:
        with lock:
            return cached(*args)

    return shared
