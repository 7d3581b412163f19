"""One component built into the store: configure, build, install, then commit the entry; then,
for ``build --test`` and ``release``, its tests on that entry.

Safety against being killed at any moment (SIGKILL included):

- an entry is staged aside and renamed into the store with its record written last (store.py);
- the entry lock and the build-directory lock are flocks, released by the kernel on death;
- children run in their own sessions, so a SIGKILLed builder leaves them running: their process
  groups are written beside the build-directory lock, and the next build stops them first
  (builder.core.orphans);
- the configure stamp is removed before configure runs and written (atomically) after it
  succeeds, so a build directory whose configure never finished is configured from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import __version__
from builder.core import orphans, proc, sanitize, sanitizer_findings
from builder.core.errors import BuildError, CommandFailed
from builder.core.fs import atomic_write
from builder.core.layout import Layout
from builder.engine import ninja_status
from builder.engine.report import ComponentResult, Progress
from builder.engine.store import Store, file_lock, lock_path
from builder.manifest.model import source_label
from builder.plan import (
    COMPILER_ENV,
    ComponentPlan,
    Plan,
    Step,
    hash_inputs,
    launcher_defines,
)
from builder.plan_suites import TEST_STEP, TEST_STEP_BUILD, SuiteStep

STAMP = ".infini-stack-configured"


class Cancelled(Exception):
    """A worker noticed the run was interrupted; not an error of its component."""


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
        result.build_dir = str(component.build_dir)
        result.depends = list(component.depends)
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
                running = build_lock.with_suffix(".running")
                orphans.stop_orphans(running)
                children = orphans.TrackedChildren(self.children, running)
                try:
                    self._build_locked(component, jobs, result, children)
                finally:  # failed builds report their time too
                    result.seconds = round(time.monotonic() - start - result.waited, 3)
        result.status = "built"

    def run_tests(self, component: ComponentPlan, result: ComponentResult) -> None:
        """The component's own tests on its entry, after its build or a store hit: its in-build
        test (built beside it), then its pytest suite."""
        logs = self.layout.logs(self.run_id) / component.name
        logs.mkdir(parents=True, exist_ok=True)
        # One run at a time per entry: two would share its test and suite build directories.
        lock = lock_path(self.layout.locks(), f"suite:{component.build_dir}")
        with file_lock(lock, on_wait=lambda holder: self.progress.waiting(component.name, holder)):
            if component.test is not None:
                self._run_test(component, result, logs)
            if component.suite is not None:
                self._run_suite(component, result, logs)

    def _run_test(self, component: ComponentPlan, result: ComponentResult, logs: Path) -> None:
        """The component configured with its test's options beside its build, built, and the
        test's command run there, with the sanitizer's runtime where the component is
        sanitized; a sanitizer report fails it."""
        from builder.engine.suite import build_beside

        test = component.test
        assert test is not None
        env = self._env(component)
        self.progress.step(component.name, TEST_STEP_BUILD)
        begun = time.monotonic() - self.started
        try:
            seconds = build_beside(
                component.name, test.steps, test.build_dir, env, logs, self.children
            )
        except BuildError as exc:
            result.logs.update(_written(logs, test.steps))
            if self.cancelled.is_set():
                raise Cancelled from exc
            raise
        result.logs.update(_written(logs, test.steps))
        result.steps.update(seconds)
        for kind, took in seconds.items():  # seconds into the run, as the entry's steps
            result.step_started[kind] = round(begun, 3)
            begun += took
        self.progress.step_done(component.name, TEST_STEP_BUILD, sum(seconds.values()))
        if not test.command:
            return
        log = logs / f"{TEST_STEP}.log"
        result.logs[TEST_STEP] = str(log)
        self.progress.step(component.name, TEST_STEP)
        result.step_started[TEST_STEP] = round(time.monotonic() - self.started, 3)
        try:
            done = proc.run(
                test.command,
                what=f"{component.name}: {TEST_STEP}",
                cwd=test.build_dir,
                env=self._sanitized_env(component, env, tests=True),
                log=log,
                children=self.children,
            )
        except CommandFailed as exc:
            if self.cancelled.is_set():
                raise Cancelled from exc
            self._sanitizer_reports(component, TEST_STEP, log, result)
            raise BuildError(
                f"component '{component.name}', step {TEST_STEP}: " + exc.message
            ) from exc
        self._sanitizer_reports(component, TEST_STEP, log, result)
        result.steps[TEST_STEP] = round(done.seconds, 3)
        self.progress.step_done(component.name, TEST_STEP, done.seconds)

    def _run_suite(self, component: ComponentPlan, result: ComponentResult, logs: Path) -> None:
        """The component's own pytest suite on its entry."""
        from builder.engine.suite import SuiteFailed, run_suite

        started = round(time.monotonic() - self.started, 3)
        self.progress.step(component.name, "suite")
        try:
            result.suite = run_suite(
                component,
                env=self._sanitized_env(component, self._env(component)),
                logs=logs,
                children=self.children,
                say=lambda text: self.progress.say(component.name, text),
            )
        except BuildError as exc:
            result.suite = exc.record if isinstance(exc, SuiteFailed) else {}
            result.suite["started"] = started
            # The log to read is the suite's (or its build step's), not the entry's last step.
            if written := [log for log in logs.glob("suite*.log") if log.is_file()]:
                result.logs["suite"] = str(max(written, key=lambda log: log.stat().st_mtime))
            if self.cancelled.is_set():
                result.suite["interrupted"] = True
                raise Cancelled from exc
            raise
        result.suite["started"] = started  # seconds into the run, as ``result.started``
        result.logs["suite"] = result.suite["log"]
        self.progress.step_done(component.name, "suite", result.suite["seconds"])

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
                raise Cancelled
            argv = self._argv(step, jobs)
            if step.kind == "configure" and self._prepare_configure(component, argv):
                result.reused.append(step.kind)
                continue
            log = self.log_path(component, step.kind)
            result.logs[step.kind] = str(log)
            self.progress.step(component.name, step.kind)
            result.step_started[step.kind] = round(time.monotonic() - self.started, 3)
            try:
                done = proc.run(
                    argv,
                    what=f"{component.name}: {step.kind}",
                    cwd=step.cwd,
                    env=env,
                    log=log,
                    children=children,
                    on_line=self._ninja(component.name, result) if step.kind == "build" else None,
                )
            except CommandFailed as exc:
                if self.cancelled.is_set():
                    raise Cancelled from exc
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
        _require_outputs(component, prefix, result)
        changed = self._source_changed(component)
        result.outputs = sorted(
            str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file() or p.is_symlink()
        )
        record = self._record(component, result, commands)
        record["source_changed_during_build"] = changed
        self.store.commit(component.key, record)

    def _ninja(self, name: str, result: ComponentResult) -> Callable[[str], None]:
        """What reads the build step's Ninja status lines: the progress shows them, the
        result keeps the last (edges done, of the total)."""

        def seen(line: str) -> None:
            status = ninja_status.parse(line)
            if status is not None:
                result.compiled = [status.done, status.total]
                self.progress.compiling(name, status)

        return seen

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

    def _sanitized_env(
        self, component: ComponentPlan, env: dict[str, str], *, tests: bool = False
    ) -> dict[str, str]:
        """``env`` with a sanitized component's runtime preloaded, its options and suppressions
        (its tests, and its own pytest suite, whose interpreter is not built with it)."""
        if component.sanitize is None:
            return env
        where = self.layout.logs(self.run_id) / "suppressions"
        files = sanitize.suppression_files(component.sanitize, self.plan.stack.suppressions, where)
        host = self.plan.host
        make = sanitize.env_for_tests if tests else sanitize.run_env
        return make(component.sanitize, host.cxx, env, suppressions=files)

    def _sanitizer_reports(
        self, component: ComponentPlan, kind: str, log: Path, result: ComponentResult
    ) -> None:
        """A sanitizer report in a sanitized step's log fails the step, whatever its exit
        status; the run report keeps each report's first lines."""
        if component.sanitize is None:
            return
        found = sanitizer_findings.findings(log.read_text(encoding="utf-8", errors="replace"))
        if not found:
            return
        result.findings = [{"step": kind, **f.to_json()} for f in found]
        lines = [line for f in found for line in f.lines()]
        raise BuildError(
            f"component '{component.name}', step {kind}: {len(found)} sanitizer "
            f"report(s) ({component.sanitize.spec}):\n" + "\n".join(f"  {x}" for x in lines),
            hint=f"full log: {log}",
        )

    def _env(self, component: ComponentPlan) -> dict[str, str]:
        env = dict(self.env if self.env is not None else self.plan.host.env or os.environ)
        env.update(component.env)
        env["NINJA_STATUS"] = ninja_status.NINJA_STATUS  # what _ninja reads, whatever the user's
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


def _require_outputs(component: ComponentPlan, prefix: Path, result: ComponentResult) -> None:
    """Every output the recipe declares must be in the installed prefix."""
    missing = [o for o in component.outputs if not (prefix / o).exists()]
    if missing:
        raise BuildError(
            f"component '{component.name}' installed without its declared outputs: "
            + ", ".join(missing),
            hint=f"install log: {result.logs.get('install')}",
        )


def _read_stamp(stamp: Path) -> dict[str, str] | None:
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _clear_dir(path: Path) -> None:

    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _written(logs: Path, steps: tuple[SuiteStep, ...]) -> dict[str, str]:
    """The logs this run wrote for ``steps`` (a configure its stamp skipped wrote none)."""
    return {s.kind: str(log) for s in steps if (log := logs / f"{s.kind}.log").is_file()}
