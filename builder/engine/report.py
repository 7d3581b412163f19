"""Run reports and progress: JSON for machines, live lines and a summary table for people.

Every ``build`` (and ``wheel``) writes ``runs/<stamp>-<command>-<vendor>-<pid>.json`` and
``runs/last.json``. Progress is a live line per running component on a terminal, plain lines
otherwise, with fold groups under GitHub Actions. A compile's Ninja status (edges done of the
total, the rate, the time left: :mod:`builder.engine.ninja_status`) is on its live line, and in
plain and GitHub output a line at most once a minute per running component.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from builder import noop
from builder.core.errors import UsageError
from builder.core.layout import Layout
from builder.core.redact import redact_data
from builder.engine import ninja_status
from builder.engine.ninja_status import Clock, Compile, Throttle
from builder.engine.suite_report import suites_text

Status = Literal["hit", "pulled", "built", "failed", "skipped", "interrupted"]
STATUSES: tuple[Status, ...] = ("hit", "pulled", "built", "failed", "skipped", "interrupted")


@dataclass
class ComponentResult:
    name: str
    key: str
    status: Status = "skipped"
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    reused: list[str] = field(default_factory=list)  # steps skipped: the build dir had them done
    logs: dict[str, str] = field(default_factory=dict)  # step -> log path
    outputs: list[str] = field(default_factory=list)
    prefix: str = ""
    error: str | None = None
    started: float | None = None  # seconds after the run started
    seconds: float = 0.0
    waited: float = 0.0  # seconds spent waiting for another process's lock
    jobs: int = 0  # the share of the job budget it compiled with
    step_started: dict[str, float] = field(default_factory=dict)  # step -> s after run start
    compiled: list[int] = field(default_factory=list)  # Ninja's last [done, total] edges
    build_dir: str = ""  # its CMake build directory (its .ninja_log: report --trace)
    depends: list[str] = field(default_factory=list)  # the components it waited for
    # The remote cache: where a pulled entry came from (cache, manifest, signer, bytes), or
    # what became of pushing a built one (pushed, bytes; or why it was not).
    cache: dict[str, Any] = field(default_factory=dict)
    # Built from a --worktree tree: its path, HEAD and the sha256 of its changes ("": clean).
    worktree: dict[str, str] = field(default_factory=dict)
    # Sanitizer reports its steps printed (builder.core.sanitizer_findings), first lines each.
    findings: list[dict[str, Any]] = field(default_factory=list)
    # Its own pytest suite, run on the entry (build --test, release): the command, counts,
    # slowest tests, failures with their first lines, deselections with their reasons.
    suite: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunReport:
    command: str
    vendor: str
    manifest: str
    started: float = field(default_factory=time.time)
    seconds: float = 0.0
    providers: dict[str, str] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    store: str = ""
    jobs: int = 0
    launcher: str | None = None
    sanitize: str | None = None  # the sanitizer profile built with (address,undefined, thread)
    components: list[ComponentResult] = field(default_factory=list)
    ok: bool = False
    error: str | None = None
    interrupted: str | None = None
    fast_path: bool = False  # settled from the no-op memo, without loading the manifest
    wheels: list[str] = field(default_factory=list)  # what `wheel` or `release` wrote
    cache: dict[str, Any] = field(default_factory=dict)  # the caches used, pushes, warnings
    # `release` only: its stages (seconds, start), and where it failed (failed_stage, exit_code,
    # kept: the failed-run directory).
    release: dict[str, Any] = field(default_factory=dict)
    # CPU-seconds, cores, the bound (CPU work / cores) and the wall time (builder.engine.bound)
    cpu: dict[str, Any] = field(default_factory=dict)

    def result(self, name: str) -> ComponentResult:
        return next(c for c in self.components if c.name == name)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["totals"] = totals(self.components)
        return data


def totals(components: list[ComponentResult]) -> dict[str, Any]:
    out: dict[str, Any] = {s: sum(1 for c in components if c.status == s) for s in STATUSES}
    out["build_seconds"] = round(sum(c.seconds for c in components if c.status == "built"), 3)
    return out


def write(report: RunReport, layout: Layout) -> Path:
    text = json.dumps(redact_data(report.to_json()), indent=2) + "\n"
    where = noop.write_run_report(
        str(layout.runs()), report.command, report.vendor, report.started, text
    )
    return Path(where)


def read_last(layout: Layout) -> dict[str, Any]:
    last = layout.runs() / "last.json"
    if not last.is_file():
        raise UsageError(f"no run report yet ({last} does not exist)", hint="run a build first")
    try:
        data = json.loads(last.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{last} is not a run report: {exc}", hint="run a build again") from None
    if not isinstance(data, dict):
        raise UsageError(f"{last} is not a run report", hint="run a build again")
    return data


def _steps_text(c: Mapping[str, Any]) -> str:
    parts = [f"{k} {v:.1f}s" for k, v in c.get("steps", {}).items()]
    parts += [f"{k} reused" for k in c.get("reused", [])]
    if c.get("compiled"):
        parts.append("compiled {}/{}".format(*c["compiled"]))
    if c.get("waited"):
        parts.append(f"waited {c['waited']:.1f}s")
    if c.get("status") == "pulled" and (cache := c.get("cache") or {}).get("cache"):
        parts.append(f"{cache.get('bytes', 0) / 1e6:.1f} MB from {cache['cache']}")
    return ", ".join(parts)


def summary_table(data: Mapping[str, Any], *, timed: bool = True) -> str:
    """Per component a row, then the totals; ``timed=False`` leaves the run's seconds off."""
    rows = [("component", "status", "key", "seconds", "steps")]
    for c in data["components"]:
        seconds = f"{c['seconds']:.1f}" if c["status"] in ("built", "failed", "pulled") else "-"
        steps = (c.get("error") or "") if c["status"] == "skipped" else _steps_text(c)
        rows.append((c["name"], c["status"], c["key"][:12], seconds, steps))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        ("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4]).rstrip() for r in rows
    ]
    text = totals_text(data)
    lines.append(f"{text} in {data['seconds']:.1f}s" if timed else text)
    if interpreters := interpreters_text(data):
        lines.append(interpreters)
    if suites := suites_text(data):
        lines.append(suites)
    return "\n".join([*lines, *findings_lines(data)])


def interpreters_text(data: Mapping[str, Any]) -> str:
    """For a build of several interpreters: which components were built once for all of them
    and which once per interpreter; empty otherwise."""
    from builder.plan_interpreters import split_lane

    names = [split_lane(c["name"]) for c in data["components"]]
    tags = list(dict.fromkeys(tag for _, tag in names if tag))
    if not tags:
        return ""
    shared = [base for base, tag in names if tag is None]
    own = list(dict.fromkeys(base for base, tag in names if tag))
    return (
        f"interpreters {', '.join(tags)}: built once for all: {', '.join(shared) or '-'}; "
        f"once per interpreter: {', '.join(own)}"
    )


def stages_of(release: Mapping[str, Any], kind: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(interpreter tag, stage) of a release's ``kind`` stages (``check``, ``check cp312``,
    ...); the tag is empty for a release of one interpreter."""
    stages = release.get("stages") or {}
    return [
        (name.partition(" ")[2], stage)
        for name, stage in stages.items()
        if name.partition(" ")[0] == kind
    ]


def totals_text(data: Mapping[str, Any]) -> str:
    """``cpu: 4 built, 0 from the store, 0 failed`` (and pulled, skipped, interrupted ones)."""
    t = data.get("totals") or {
        s: sum(1 for c in data["components"] if c["status"] == s) for s in STATUSES
    }
    text = (
        f"{data['vendor']}: {t.get('built', 0)} built, {t.get('hit', 0)} from the store, "
        f"{t.get('failed', 0)} failed"
    )
    if t.get("pulled"):
        text += f", {t['pulled']} pulled"
    if t.get("skipped"):
        text += f", {t['skipped']} skipped"
    if t.get("interrupted"):
        text += f", {t['interrupted']} interrupted"
    return text


def findings_lines(data: Mapping[str, Any]) -> list[str]:
    """The first lines of every sanitizer report, per component: kind, where, top frames."""
    lines = []
    for c in data["components"]:
        for f in c.get("findings") or ():
            where = f" at {f['where']}" if f.get("where") else ""
            lines.append(f"{c['name']} ({f['step']}): {f['sanitizer']}: {f['kind']}{where}")
            lines.extend(f"    {frame}" for frame in f.get("frames", ()))
    if lines and data.get("sanitize"):
        lines.insert(0, f"sanitizer reports ({data['sanitize']}):")
    return lines


# --- progress -----------------------------------------------------------------------------------

ProgressKind = Literal["auto", "plain", "live", "github", "quiet"]


class Progress:
    """Plain progress lines: one per event, safe to interleave in a log file."""

    def __init__(self, stream: IO[str] | None = None, clock: Clock = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.lock = threading.Lock()
        self.clock = clock
        self.compiles: dict[str, Compile] = {}
        self.throttle = Throttle()

    def _print(self, *lines: str) -> None:
        with self.lock:
            for line in lines:
                print(line, file=self.stream)
            self.stream.flush()

    def say(self, component: str, text: str) -> None:
        self._print(f"[{component}] {text}")

    def note(self, text: str) -> None:
        self._print(text)

    def start(self, component: str, key: str, jobs: int) -> None:
        self.say(component, f"building (key {key[:12]}, {jobs} job{'s' * (jobs != 1)})")

    def waiting(self, component: str, holder: str) -> None:
        self.say(component, f"waiting: {holder} is building the same store entry")

    def step(self, component: str, step: str) -> None:
        self.say(component, f"{step} ...")

    def step_done(self, component: str, step: str, seconds: float) -> None:
        self.say(component, f"{step} done in {seconds:.1f}s")

    def compiling(self, component: str, status: ninja_status.Status) -> None:
        """A Ninja status line of ``component``'s build: a line when a minute has passed."""
        now = self.clock()
        with self.lock:
            tracker = self.compiles.get(component)
            if tracker is None:
                tracker = self.compiles[component] = Compile(started=now)
                self.throttle.start(component, now)
            tracker.update(status)
        if self.throttle.due(component, now):
            self.say(component, f"build {tracker.snapshot(now).render()}")

    def finish(self, result: ComponentResult) -> None:
        if result.status == "built":
            self.say(result.name, f"built in {result.seconds:.1f}s")
        elif result.status == "failed":
            log = _failed_log(result)
            why = f": {result.error.splitlines()[0]}" if result.error else ""
            self.say(result.name, f"FAILED{why}" + (f" (log: {log})" if log else ""))
        elif result.status == "hit" and result.waited:
            self.say(result.name, f"built by another process (waited {result.waited:.1f}s)")

    def close(self) -> None:
        pass


def _failed_log(result: ComponentResult) -> str | None:
    """The log of the step that failed: once the suite has started, the suite's (or its build
    step's, as the engine recorded it; none where it wrote no log), else the last step's."""
    if result.suite:
        return result.logs.get("suite")
    return next(reversed(result.logs.values()), None) if result.logs else None


class QuietProgress(Progress):
    def _print(self, *lines: str) -> None:
        pass


class GithubProgress(Progress):
    """GitHub Actions: a line when a component starts, a fold group with its steps when done.

    Parallel components interleave, so each group is written whole when its component ends.
    """

    def step(self, component: str, step: str) -> None:
        pass

    def step_done(self, component: str, step: str, seconds: float) -> None:
        pass

    def finish(self, result: ComponentResult) -> None:
        if result.status not in ("built", "failed"):
            super().finish(result)
            return
        title = f"{result.name}: {result.status} in {result.seconds:.1f}s"
        lines = [f"::group::{title}"]
        for step, log in result.logs.items():
            took = result.steps.get(step)
            took_text = f" {took:.1f}s" if took is not None else ""
            lines.append(f"{step}{took_text}  log: {log}")
        lines.extend(f"{step} reused (configured with the same inputs)" for step in result.reused)
        lines.append("::endgroup::")
        if result.status == "failed":
            first = (result.error or "failed").splitlines()[0]
            lines.append(f"::error title={result.name} failed::{first}")
        self._print(*lines)


class LiveProgress(Progress):
    """A terminal: permanent lines for events, below them one live line per running component."""

    REFRESH = 0.2

    def __init__(self, stream: IO[str] | None = None, clock: Clock = time.monotonic) -> None:
        super().__init__(stream, clock)
        self.running: dict[str, tuple[str, float]] = {}  # component -> (step, started)
        self.shown = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, name="progress", daemon=True)
        self.thread.start()

    def _tick(self) -> None:
        while not self.stop.wait(self.REFRESH):
            self._print()

    def _print(self, *lines: str) -> None:
        with self.lock:
            out = []
            if self.shown:
                out.append(f"\x1b[{self.shown}F\x1b[J")  # up to the live block, clear below
            out.extend(line + "\n" for line in lines)
            now = self.clock()
            width = terminal_width(self.stream)
            live = [
                clip(f"  {name:<14} {step:<10} {now - since:5.1f}s  {compiled}".rstrip(), width)
                for name, (step, since, compiled) in self._running_lines()
            ]
            out.extend(line + "\n" for line in live)
            self.shown = len(live)
            self.stream.write("".join(out))
            self.stream.flush()

    def _running_lines(self) -> list[tuple[str, tuple[str, float, str]]]:
        """Each running component's step, its start and its compile (under the lock)."""
        lines = []
        for name, (step, since) in self.running.items():
            tracker = self.compiles.get(name) if step == "build" else None
            compiled = tracker.snapshot(self.clock()).render() if tracker is not None else ""
            lines.append((name, (step, since, compiled)))
        return lines

    def compiling(self, component: str, status: ninja_status.Status) -> None:
        """On the component's live line, redrawn with the others: never a line of its own."""
        now = self.clock()
        with self.lock:
            self.compiles.setdefault(component, Compile(started=now)).update(status)

    def _set(self, component: str, step: str | None, restart: bool = False) -> None:
        with self.lock:
            if step is None:
                self.running.pop(component, None)
                return
            since = self.running.get(component, ("", self.clock()))[1]
            self.running[component] = (step, self.clock() if restart else since)

    def start(self, component: str, key: str, jobs: int) -> None:
        self._set(component, "starting", restart=True)
        self._print()

    def step(self, component: str, step: str) -> None:
        self._set(component, step)
        self._print()

    def step_done(self, component: str, step: str, seconds: float) -> None:
        pass

    def waiting(self, component: str, holder: str) -> None:
        self._set(component, "waiting")
        super().waiting(component, holder)

    def finish(self, result: ComponentResult) -> None:
        self._set(result.name, None)
        if result.status in ("built", "failed"):
            steps = _steps_text(asdict(result))
            word = "built" if result.status == "built" else "FAILED"
            self._print(f"[{result.name}] {word} in {result.seconds:.1f}s ({steps})")
        else:
            super().finish(result)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        with self.lock:
            self.running.clear()
        self._print()


def terminal_width(stream: IO[str], env: Mapping[str, str] | None = None) -> int:
    """The columns of the terminal ``stream`` writes to, else ``$COLUMNS``, else 80."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        columns = (os.environ if env is None else env).get("COLUMNS", "")
        return int(columns) if columns.isdigit() and int(columns) > 0 else 80


def clip(line: str, width: int) -> str:
    """``line`` cut to fit in ``width`` columns without wrapping: a live line that wrapped would
    take two rows, and the cursor-up redraw, which counts one a line, would leave debris."""
    if len(line) < width:
        return line
    keep = max(width - 4, 0)
    return line[:keep] + "..." if keep else line[: max(width - 1, 0)]


def progress_for(
    kind: ProgressKind = "auto",
    stream: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Progress:
    stream = stream if stream is not None else sys.stderr
    env = os.environ if env is None else env
    if kind == "auto":
        if env.get("GITHUB_ACTIONS") == "true":
            kind = "github"
        elif _is_terminal(stream) and env.get("TERM", "") != "dumb" and not env.get("CI"):
            kind = "live"
        else:
            kind = "plain"
    classes: dict[str, type[Progress]] = {
        "plain": Progress,
        "live": LiveProgress,
        "github": GithubProgress,
        "quiet": QuietProgress,
    }
    return classes[kind](stream)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
