"""Execute a Plan: fetch, then build each component into the store, in dependency order.

Components whose dependencies are done build at the same time, sharing one job budget. A store
hit costs a stat: no cmake, no ninja. A failure stops new work, lets running builds finish, and
reports every failure with its command, exit status, output tail and log.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from builder import proc
from builder.errors import BuildError, CommandFailed, StackError
from builder.layout import Layout
from builder.plan import ComponentPlan, Plan, Step, hash_inputs, source_label
from builder.report import ComponentResult, RunReport
from builder.store import Store, file_lock

__all__ = ["Builder", "Progress", "Store", "execute"]

STAMP = ".infini-stack-configured"


@dataclass
class Progress:
    """Plain progress lines (CI fold groups under GitHub Actions)."""

    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, component: str, text: str) -> None:
        with self.lock:
            print(f"[{component}] {text}", file=self.stream, flush=True)


@dataclass
class Builder:
    plan: Plan
    layout: Layout
    run_id: str
    progress: Progress = field(default_factory=Progress)
    env: Mapping[str, str] | None = None
    launcher: str | None = None
    children: proc.Children = field(default_factory=proc.Children)

    @property
    def store(self) -> Store:
        return Store(self.layout)

    def log_path(self, component: ComponentPlan, step: str) -> Path:
        logs = self.layout.home / "logs" / self.run_id / component.name
        logs.mkdir(parents=True, exist_ok=True)
        return logs / f"{step}.log"

    def build_one(self, component: ComponentPlan, jobs: int, result: ComponentResult) -> None:
        start = time.monotonic()
        result.prefix = str(component.prefix)
        if self.store.has(component.key):
            result.status = "hit"
            return
        with file_lock(self.layout.locks(), f"entry:{component.key}"):
            if self.store.has(component.key):  # another process built it while we waited
                result.status = "hit"
                return
            with file_lock(self.layout.locks(), f"build:{component.build_dir}"):
                self._build_locked(component, jobs, result)
        result.status = "built"
        result.seconds = time.monotonic() - start

    def _build_locked(self, component: ComponentPlan, jobs: int, result: ComponentResult) -> None:
        staging = self.store.begin(component.key)
        env = self._env(component)
        for step in component.steps:
            if step.kind == "configure" and self._configured(component, step):
                continue
            argv = self._argv(step, jobs)
            log = self.log_path(component, step.kind)
            result.logs[step.kind] = str(log)
            self.progress.say(component.name, f"{step.kind} ...")
            try:
                done = proc.run(argv, what=f"{component.name}: {step.kind}", cwd=step.cwd,
                                env=env, log=log, children=self.children)
            except CommandFailed as exc:
                if step.kind == "configure":
                    (component.build_dir / STAMP).unlink(missing_ok=True)
                raise BuildError(f"component '{component.name}', step {step.kind}: "
                                 + exc.message) from exc
            result.steps[step.kind] = round(done.seconds, 3)
            self.progress.say(component.name, f"{step.kind} done in {done.seconds:.1f}s")
            if step.kind == "configure":
                (component.build_dir / STAMP).write_text(_configure_digest(step, env))
        prefix = staging / "prefix"
        missing = [o for o in component.outputs if not (prefix / o).exists()]
        if missing:
            raise BuildError(
                f"component '{component.name}' installed without its declared outputs: "
                + ", ".join(missing),
                hint=f"install log: {result.logs.get('install')}",
            )
        result.outputs = sorted(
            str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file() or p.is_symlink()
        )
        self.store.commit(component.key, self._record(component, result))

    def _configured(self, component: ComponentPlan, step: Step) -> bool:
        """Configure is skipped when this build dir was configured with exactly these inputs."""
        stamp = component.build_dir / STAMP
        cache = component.build_dir / "CMakeCache.txt"
        env = self._env(component)
        return (
            stamp.is_file() and cache.is_file()
            and stamp.read_text() == _configure_digest(step, env)
        )

    def _argv(self, step: Step, jobs: int) -> tuple[str, ...]:
        argv = step.argv
        if step.kind == "build":  # the job budget is shared between concurrent components
            argv = (*argv[:-1], str(jobs))
        if step.kind == "configure" and self.launcher:
            # The launcher does not change outputs, so it is not part of the cache key.
            argv = (*argv, *(f"-DCMAKE_{lang}_COMPILER_LAUNCHER={self.launcher}"
                             for lang in ("C", "CXX", "CUDA")))
        return argv

    def _env(self, component: ComponentPlan) -> dict[str, str]:
        env = dict(self.env if self.env is not None else self.plan.host.env)
        env.update(component.env)
        return env

    def _record(self, component: ComponentPlan, result: ComponentResult) -> dict[str, Any]:
        return {
            "name": component.name,
            "vendor": component.vendor,
            "key": component.key,
            "source": source_label(component.source),
            "inputs": dict(component.key_inputs),
            "commands": [list(s.argv) for s in component.steps],
            "steps": result.steps,
            "logs": result.logs,
            "outputs": result.outputs,
            "created": time.time(),
        }


def _configure_digest(step: Step, env: Mapping[str, str]) -> str:
    return hash_inputs({"argv": list(step.argv)})


def execute(
    plan: Plan,
    layout: Layout,
    report: RunReport,
    *,
    prepare: Callable[[ComponentPlan], None] | None = None,
    progress: Progress | None = None,
    launcher: str | None = None,
) -> RunReport:
    """Build every component of ``plan``; raises BuildError after all running work finished."""
    builder = Builder(plan=plan, layout=layout, run_id=_run_id(report), launcher=launcher,
                      progress=progress or Progress())
    results = {c.name: ComponentResult(name=c.name, key=c.key) for c in plan.components}
    report.components = list(results.values())
    start = time.monotonic()
    errors = _schedule(plan, builder, results, prepare)
    report.seconds = round(time.monotonic() - start, 3)
    report.ok = not errors
    if errors:
        failed = [name for name, _ in errors]
        raise BuildError(
            "\n".join(exc.message for _, exc in errors)
            + f"\nbuild failed: {', '.join(failed)}",
        )
    return report


def _run_id(report: RunReport) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(report.started)) + f"-{report.vendor}"


def _schedule(
    plan: Plan,
    builder: Builder,
    results: dict[str, ComponentResult],
    prepare: Callable[[ComponentPlan], None] | None,
) -> list[tuple[str, StackError]]:
    pending = list(plan.components)  # dependency order
    done: set[str] = set()
    errors: list[tuple[str, StackError]] = []
    running: dict[Future[None], ComponentPlan] = {}
    slots = max(1, plan.jobs)

    def task(component: ComponentPlan, jobs: int) -> None:
        if prepare is not None:
            prepare(component)
        builder.build_one(component, jobs, results[component.name])

    with ThreadPoolExecutor(max_workers=slots) as pool:
        try:
            while pending or running:
                if not errors:
                    _settle_hits(pending, done, builder.store, results)
                    ready = [c for c in pending if set(c.depends) <= done]
                    starting = ready[: slots - len(running)]
                    share = max(1, plan.jobs // max(1, len(running) + len(starting)))
                    for c in starting:
                        pending.remove(c)
                        running[pool.submit(task, c, share)] = c
                if not running:
                    break  # what is left waits on a failure
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    c = running.pop(future)
                    exc = future.exception()
                    if exc is None:
                        done.add(c.name)
                    elif isinstance(exc, StackError):
                        results[c.name].status = "failed"
                        results[c.name].error = exc.message
                        errors.append((c.name, exc))
                    else:
                        raise exc
        except KeyboardInterrupt:
            names = ", ".join(c.name for c in running.values()) or "nothing"
            for c in running.values():
                results[c.name].status = "interrupted"
            builder.children.terminate_all()
            builder.progress.say("build", f"interrupted while building {names}; stopped")
            raise
    return errors


def _settle_hits(
    pending: list[ComponentPlan], done: set[str], store: Store,
    results: dict[str, ComponentResult],
) -> None:
    """Store hits cost a stat: settle them at once, in order, without taking a slot."""
    for c in list(pending):
        if set(c.depends) <= done and store.has(c.key):
            results[c.name].status = "hit"
            results[c.name].prefix = str(c.prefix)
            done.add(c.name)
            pending.remove(c)


