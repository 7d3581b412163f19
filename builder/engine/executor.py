"""Execute a Plan: build each component into the store, in dependency order, never half-built.

Components whose dependencies are done build at the same time, sharing one job budget that is
never oversubscribed. A store hit costs a stat: no cmake, no ninja. A failure stops new work
(with ``keep_going``, only the work that depends on it), lets running builds finish, and reports
every failure with its command, exit status, output tail and log, and why each component left
was not built. Ctrl-C and SIGTERM stop the child processes and say what was interrupted.

Safety against being killed at any moment (SIGKILL included):

- an entry is staged aside and renamed into the store with its record written last (store.py);
- the entry lock and the build-directory lock are flocks, released by the kernel on death;
- children run in their own sessions, so a SIGKILLed builder leaves them running: their process
  groups are written beside the build-directory lock, and the next build stops them first;
- the configure stamp is removed before configure runs and written (atomically) after it
  succeeds, so a build directory whose configure never finished is configured from scratch.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import __version__
from builder.core import proc
from builder.core.errors import BuildError, CommandFailed, StackError
from builder.core.fs import atomic_write
from builder.core.layout import Layout
from builder.engine.report import ComponentResult, Progress, RunReport
from builder.engine.store import Store, file_lock, lock_path
from builder.plan import (
    COMPILER_ENV,
    ComponentPlan,
    Plan,
    Step,
    hash_inputs,
    launcher_defines,
    source_label,
)

__all__ = ["Builder", "Interrupted", "Progress", "Store", "execute", "interrupts"]

STAMP = ".infini-stack-configured"


class Interrupted(BuildError):
    """Ctrl-C or SIGTERM: running builds were stopped; exits 128 + the signal number."""

    def __init__(self, signum: int, running: Mapping[str, str] | None = None) -> None:
        self.signum = signum
        self.running = dict(running or {})
        name = signal.Signals(signum).name
        if self.running:
            what = ", ".join(f"{c} ({s})" for c, s in self.running.items())
            message = f"interrupted by {name} while building {what}; their processes were stopped"
        else:
            message = f"interrupted by {name} before any component started building"
        super().__init__(
            message,
            hint="nothing partial was left in the store: the next build starts cleanly",
        )
        self.exit_code = 128 + signum


class _Cancelled(Exception):
    """A worker noticed the run was interrupted; not an error of its component."""


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Turn SIGTERM into an exception in the main thread, as Ctrl-C already is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- children that outlive a SIGKILLed builder ------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (to tell a reused pid apart), None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


class TrackedChildren(proc.Children):
    """One component's children, also listed in a file so that a later build can stop them.

    Children run in their own sessions (so a terminal's Ctrl-C reaches only this process, which
    stops them in order); the price is that they survive a SIGKILL of the builder. The file names
    each child's process group and start time.
    """

    def __init__(self, shared: proc.Children, record: Path) -> None:
        super().__init__()
        self.shared = shared
        self.record = record
        self.pids: dict[int, str] = {}
        self.guard = threading.Lock()

    def add(self, p: Any) -> None:
        self.shared.add(p)
        with self.guard:
            self.pids[p.pid] = _start_time(p.pid) or "?"
            self._write()

    def discard(self, p: Any) -> None:
        self.shared.discard(p)
        with self.guard:
            self.pids.pop(p.pid, None)
            self._write()

    def _write(self) -> None:
        if not self.pids:
            self.record.unlink(missing_ok=True)
            return
        atomic_write(self.record, "".join(f"{pid} {start}\n" for pid, start in self.pids.items()))


def stop_orphans(record: Path, grace: float = 5.0) -> list[int]:
    """Stop the sessions a killed build left running; returns the session ids stopped.

    Every child was started in a session of its own, and whatever it started (ninja puts each
    compiler in a process group of its own) stays in that session; so the session id, with the
    leader's start time, names everything a killed builder left behind.
    """
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return []
    stopped = []
    for line in lines:
        sid_text, _, start = line.partition(" ")
        sid = int(sid_text)
        now = _start_time(sid)
        if now is not None and now != start:
            continue  # the pid was reused: that process is not ours
        if _session(sid):
            _stop_session(sid, grace)
            stopped.append(sid)
    record.unlink(missing_ok=True)
    return stopped


def _session(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live (not zombie) process in session ``sid``."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path("/proc", entry.name, "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            out.append((int(entry.name), int(fields[2])))
    return out


def _stop_session(sid: int, grace: float) -> None:
    """SIGTERM every process group of the session (ninja then stops its compilers and removes
    their partial outputs), SIGKILL what is left after ``grace`` seconds."""
    for sig, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pgid in {pgid for _, pgid in _session(sid)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if not _session(sid):
                return
            time.sleep(0.05)


# --- one component ------------------------------------------------------------------------------


@dataclass
class Builder:
    plan: Plan
    layout: Layout
    run_id: str
    progress: Progress = field(default_factory=Progress)
    env: Mapping[str, str] | None = None
    launcher: str | None = None
    children: proc.Children = field(default_factory=proc.Children)
    cancelled: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)
    verify_sources: Callable[[ComponentPlan], str | None] | None = None

    @property
    def store(self) -> Store:
        return Store(self.layout)

    def log_path(self, component: ComponentPlan, step: str) -> Path:
        logs = self.layout.logs(self.run_id) / component.name
        logs.mkdir(parents=True, exist_ok=True)
        return logs / f"{step}.log"

    def build_one(self, component: ComponentPlan, jobs: int, result: ComponentResult) -> None:
        start = time.monotonic()
        result.prefix = str(component.prefix)
        result.jobs = jobs
        if self.store.has(component.key):
            result.status = "hit"
            return

        waits: list[float] = []

        def on_wait(holder: str) -> None:
            waits.append(time.monotonic())
            self.progress.waiting(component.name, holder)

        with self.store.lock(component.key, on_wait=on_wait):
            if waits:
                result.waited = round(time.monotonic() - waits[0], 3)
            if self.store.has(component.key):  # another process built it while we waited
                result.status = "hit"
                return
            build_lock = lock_path(self.layout.locks(), f"build:{component.build_dir}")
            with file_lock(build_lock, on_wait=on_wait):
                if waits:
                    result.waited = round(time.monotonic() - waits[0], 3)
                stop_orphans(build_lock.with_suffix(".running"))
                children = TrackedChildren(self.children, build_lock.with_suffix(".running"))
                try:
                    self._build_locked(component, jobs, result, children)
                finally:  # failed builds report their time too
                    result.seconds = round(time.monotonic() - start - result.waited, 3)
        result.status = "built"

    def _build_locked(
        self,
        component: ComponentPlan,
        jobs: int,
        result: ComponentResult,
        children: proc.Children,
    ) -> None:
        staging = self.store.begin(component.key)
        env = self._env(component)
        commands: list[dict[str, Any]] = []
        for step in component.steps:
            if self.cancelled.is_set():
                raise _Cancelled
            argv = self._argv(step, jobs)
            if step.kind == "configure" and self._prepare_configure(component, argv):
                result.reused.append(step.kind)
                continue
            log = self.log_path(component, step.kind)
            result.logs[step.kind] = str(log)
            self.progress.step(component.name, step.kind)
            try:
                done = proc.run(
                    argv,
                    what=f"{component.name}: {step.kind}",
                    cwd=step.cwd,
                    env=env,
                    log=log,
                    children=children,
                )
            except CommandFailed as exc:
                if self.cancelled.is_set():
                    raise _Cancelled from exc
                raise BuildError(
                    f"component '{component.name}', step {step.kind}: " + exc.message
                ) from exc
            commands.append(
                {"step": step.kind, "argv": list(argv), "cwd": str(step.cwd) if step.cwd else None}
            )
            result.steps[step.kind] = round(done.seconds, 3)
            self.progress.step_done(component.name, step.kind, done.seconds)
            if step.kind == "configure":
                atomic_write(component.build_dir / STAMP, json.dumps(self._stamp(component, argv)))
        prefix = staging / "prefix"
        missing = [o for o in component.outputs if not (prefix / o).exists()]
        if missing:
            raise BuildError(
                f"component '{component.name}' installed without its declared outputs: "
                + ", ".join(missing),
                hint=f"install log: {result.logs.get('install')}",
            )
        changed = self._source_changed(component)
        result.outputs = sorted(
            str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file() or p.is_symlink()
        )
        record = self._record(component, result, commands)
        record["source_changed_during_build"] = changed
        self.store.commit(component.key, record)

    def _prepare_configure(self, component: ComponentPlan, argv: tuple[str, ...]) -> bool:
        """True when the build dir is configured with exactly these inputs (configure skipped).

        Otherwise the stamp goes first, so that a configure killed halfway is never trusted. A
        build dir is configured again in place when only cache variables changed (a path
        source's next key: Ninja then rebuilds only what changed), and from scratch when what
        CMake reads only on a first configure changed (the compiler, its flags from the
        environment), or when it holds a cache but no stamp: its configure was interrupted or
        failed, and its cache may be half-written.
        """
        build_dir = component.build_dir
        stamp = build_dir / STAMP
        wanted = self._stamp(component, argv)
        found = _read_stamp(stamp)
        if (
            found == wanted
            and (build_dir / "CMakeCache.txt").is_file()
            and (build_dir / "build.ninja").is_file()
        ):
            return True
        configured = (build_dir / "CMakeCache.txt").exists() or (build_dir / "CMakeFiles").exists()
        if configured and (found is None or found.get("fresh") != wanted["fresh"]):
            _clear_dir(build_dir)
        stamp.unlink(missing_ok=True)
        return False

    def _stamp(self, component: ComponentPlan, argv: tuple[str, ...]) -> dict[str, str]:
        env = self._env(component)
        first = {n: env[n] for n in COMPILER_ENV if n in env}  # CMake reads them once
        host = self.plan.host
        return {
            "argv": hash_inputs({"argv": list(argv), "env": dict(component.env)}),
            "fresh": hash_inputs({"env": first, "cxx": [host.cxx, host.cxx_version]}),
        }

    def _source_changed(self, component: ComponentPlan) -> bool:
        """Whether a path source's content differs from what its key was computed from.

        An edit made during the build, or a project that writes into its own sources at
        configure time (upstream's generated/): said, and recorded in the entry, not fatal.
        """
        if self.verify_sources is None or not component.incremental:
            return False
        now = self.verify_sources(component)
        if now is None or now == component.source_id:
            return False
        self.progress.say(
            component.name,
            f"warning: its path source {component.source_dir} changed while it was being built "
            "(an edit, or the build writing into its sources); the entry is keyed by the content "
            "at the start",
        )
        return True

    def _argv(self, step: Step, jobs: int) -> tuple[str, ...]:
        argv = step.argv
        if step.kind == "build":  # the job budget is shared between concurrent components
            argv = (*argv[:-1], str(jobs))
        if step.kind == "configure" and self.launcher:
            # The launcher does not change outputs, so it is not part of the cache key.
            argv = (*argv, *(f"-D{k}={v}" for k, v in launcher_defines(self.launcher).items()))
        return argv

    def _env(self, component: ComponentPlan) -> dict[str, str]:
        env = dict(self.env if self.env is not None else self.plan.host.env or os.environ)
        env.update(component.env)
        return env

    def _record(
        self,
        component: ComponentPlan,
        result: ComponentResult,
        commands: list[dict[str, Any]],
    ) -> dict[str, Any]:
        return {
            "name": component.name,
            "vendor": component.vendor,
            "key": component.key,
            "tool": __version__,
            "source": source_label(component.source),
            "source_id": component.source_id,
            "inputs": dict(component.key_inputs),
            "env": dict(component.env),
            "launcher": self.launcher,
            "commands": commands,
            "steps": result.steps,
            "reused": result.reused,
            "logs": result.logs,
            "outputs": result.outputs,
            "build_dir": str(component.build_dir),
            "run": self.run_id,
            "created": time.time(),
        }


def _read_stamp(stamp: Path) -> dict[str, str] | None:
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _clear_dir(path: Path) -> None:
    import shutil

    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


# --- the run ------------------------------------------------------------------------------------


def execute(
    plan: Plan,
    layout: Layout,
    report: RunReport,
    *,
    prepare: Callable[[ComponentPlan], None] | None = None,
    progress: Progress | None = None,
    launcher: str | None = None,
    env: Mapping[str, str] | None = None,
    verify_sources: Callable[[ComponentPlan], str | None] | None = None,
    keep_going: bool = False,
) -> RunReport:
    """Build every component of ``plan``; raises BuildError after all running work finished.

    After a failure no new work starts, unless ``keep_going``: then every component that does
    not depend on a failed one is still built."""
    builder = Builder(
        plan=plan,
        layout=layout,
        run_id=run_id(report),
        launcher=launcher,
        progress=progress or Progress(),
        env=env,
        verify_sources=verify_sources,
    )
    results = {
        c.name: ComponentResult(name=c.name, key=c.key, prefix=str(c.prefix))
        for c in plan.components
    }
    report.components = list(results.values())
    report.jobs = plan.jobs
    report.launcher = launcher
    report.store = str(layout.store_root)
    start = time.monotonic()
    try:
        errors = _schedule(plan, builder, results, prepare, keep_going=keep_going)
    finally:
        report.seconds = round(time.monotonic() - start, 3)
    report.ok = not errors
    if errors:
        failed = [name for name, _ in errors]
        report.error = f"build failed: {', '.join(failed)}"
        independent = _explain_skipped(plan, results)
        hint = (
            "`infini-stack build --keep-going` builds what does not depend on the failure: "
            + ", ".join(independent)
            if independent
            else None
        )
        raise BuildError(
            "\n".join(exc.message for _, exc in errors) + f"\n{report.error}", hint=hint
        )
    return report


def _explain_skipped(plan: Plan, results: Mapping[str, ComponentResult]) -> list[str]:
    """Say why each skipped component was not built; returns those no failure held back."""
    blocked: set[str] = set()
    independent: list[str] = []
    for c in plan.components:  # dependency order: a dependency is explained before its users
        result = results[c.name]
        if result.status != "skipped":
            continue
        waits = [
            d for d in c.depends if results[d].status in ("failed", "interrupted") or d in blocked
        ]
        if waits:
            blocked.add(c.name)
            result.error = f"not built: needs {', '.join(waits)}"
        else:
            independent.append(c.name)
            result.error = "not started: the build stopped at the first failure"
    return independent


def run_id(report: RunReport) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(report.started))
    return f"{stamp}-{report.vendor}-{os.getpid()}"


def shares(free: int, ready: int) -> list[int]:
    """Split ``free`` job tokens over at most ``ready`` components, at least one token each."""
    n = min(free, ready)
    if n <= 0:
        return []
    base, extra = divmod(free, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def _schedule(
    plan: Plan,
    builder: Builder,
    results: dict[str, ComponentResult],
    prepare: Callable[[ComponentPlan], None] | None,
    *,
    keep_going: bool = False,
) -> list[tuple[str, StackError]]:
    pending = list(plan.components)  # dependency order
    done: set[str] = set()
    errors: list[tuple[str, StackError]] = []
    running: dict[Future[None], tuple[ComponentPlan, int]] = {}
    budget = max(1, plan.jobs)

    def task(component: ComponentPlan, jobs: int) -> None:
        result = results[component.name]
        result.started = round(time.monotonic() - builder.started, 3)
        builder.progress.start(component.name, component.key, jobs)
        try:
            if prepare is not None:
                prepare(component)
            builder.build_one(component, jobs, result)
        except _Cancelled:
            result.status = "interrupted"
            raise
        except StackError as exc:
            result.status = "failed"
            result.error = exc.message
            raise
        finally:
            builder.progress.finish(result)

    with ThreadPoolExecutor(max_workers=budget, thread_name_prefix="build") as pool:
        try:
            while pending or running:
                if keep_going or not errors:
                    _settle_hits(pending, done, builder.store, results)
                    free = budget - sum(jobs for _, jobs in running.values())
                    ready = [c for c in pending if set(c.depends) <= done]
                    for c, jobs in zip(ready, shares(free, len(ready)), strict=False):
                        pending.remove(c)
                        running[pool.submit(task, c, jobs)] = (c, jobs)
                if not running:
                    break  # what is left waits on a failure (or, keeping going, depends on one)
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    c, _ = running.pop(future)
                    exc = future.exception()
                    if exc is None:
                        done.add(c.name)
                    elif isinstance(exc, StackError):
                        errors.append((c.name, exc))
                    else:
                        raise exc
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            raise _stop(builder, running, results, signum) from None
    return errors


def _stop(
    builder: Builder,
    running: dict[Future[None], tuple[ComponentPlan, int]],
    results: dict[str, ComponentResult],
    signum: int,
) -> Interrupted:
    """Stop every running component's processes and wait for its worker to notice."""
    builder.cancelled.set()
    what = {c.name: _current_step(results[c.name]) for c, _ in running.values()}
    if what:
        builder.progress.note(
            "stopping " + ", ".join(f"{c} ({s})" for c, s in what.items()) + " ..."
        )
    futures = list(running)
    while not all(f.done() for f in futures):
        builder.children.terminate_all()  # again: a worker may have just started a step
        wait(futures, timeout=0.1)
    for c, _ in running.values():
        results[c.name].status = "interrupted"
    return Interrupted(signum, what)


def _current_step(result: ComponentResult) -> str:
    started = [s for s in result.logs if s not in result.steps]
    return f"{started[-1]} step" if started else "starting"


def _settle_hits(
    pending: list[ComponentPlan],
    done: set[str],
    store: Store,
    results: dict[str, ComponentResult],
) -> None:
    """Store hits cost a stat: settle them at once, in order, without taking a slot."""
    for c in list(pending):
        if set(c.depends) <= done and store.has(c.key):
            results[c.name].status = "hit"
            results[c.name].prefix = str(c.prefix)
            done.add(c.name)
            pending.remove(c)
