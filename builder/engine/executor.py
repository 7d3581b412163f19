"""Execute a Plan: build each component into the store, in dependency order, never half-built.

Components whose dependencies are done build at the same time, sharing one job budget that
builds never oversubscribe. A component's own tests run once its entry is in the store,
beside the builds that depend on it. A store hit costs a stat: no cmake, no ninja. A failure
stops new work (with ``keep_going``, only the work that depends on it), lets running builds
finish, and reports every failure with its command, exit status, output tail and log, and why
each component left was not built. Ctrl-C and SIGTERM stop the child processes and say what was
interrupted.

One component's build, and what makes it safe against a kill at any moment, is
:mod:`builder.engine.component`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from builder.core.errors import BuildError, StackError
from builder.core.layout import Layout
from builder.engine.component import Builder, Cancelled
from builder.engine.report import ComponentResult, Progress, RunReport
from builder.engine.store import Store
from builder.manifest.model import WorktreeSource
from builder.plan import (
    ComponentPlan,
    Plan,
)


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
        c.name: ComponentResult(
            name=c.name,
            key=c.key,
            prefix=str(c.prefix),
            worktree=c.source.describe() if isinstance(c.source, WorktreeSource) else {},
        )
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
    """Build in dependency order; a component's own tests run once its entry is in the store,
    beside the builds of what depends on it (they need the entry, not the tests' verdict)."""
    pending = list(plan.components)  # dependency order
    done: set[str] = set()
    errors: list[tuple[str, StackError]] = []
    running: dict[Future[None], tuple[ComponentPlan, int]] = {}
    budget = max(1, plan.jobs)

    with ThreadPoolExecutor(max_workers=budget + len(pending), thread_name_prefix="build") as pool:
        try:
            while pending or running:
                if keep_going or not errors:
                    for c in _settle_hits(pending, done, builder.store, results):
                        running[pool.submit(_tests, builder, results[c.name], c)] = (c, 0)
                    free = budget - sum(jobs for _, jobs in running.values())
                    ready = [c for c in pending if set(c.depends) <= done]
                    for c, jobs in zip(ready, shares(free, len(ready)), strict=False):
                        pending.remove(c)
                        task = pool.submit(_build, builder, results[c.name], c, jobs, prepare)
                        running[task] = (c, jobs)
                if not running:
                    break  # what is left waits on a failure (or, keeping going, depends on one)
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    c, jobs = running.pop(future)
                    exc = future.exception()
                    if isinstance(exc, StackError):
                        errors.append((c.name, exc))
                    elif exc is not None:
                        raise exc
                    elif jobs and c.tested and (keep_going or not errors):
                        done.add(c.name)  # built: its tests run on the entry
                        running[pool.submit(_tests, builder, results[c.name], c)] = (c, 0)
                    else:
                        done.add(c.name)
                        if jobs and c.tested:  # its tests are new work: not started
                            builder.progress.finish(results[c.name])
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            raise _stop(builder, running, results, signum) from None
    return errors


def _build(
    builder: Builder,
    result: ComponentResult,
    component: ComponentPlan,
    jobs: int,
    prepare: Callable[[ComponentPlan], None] | None,
) -> None:
    result.started = round(time.monotonic() - builder.started, 3)
    builder.progress.start(component.name, component.key, jobs)
    try:
        if prepare is not None:
            prepare(component)
        builder.build_one(component, jobs, result)
    except BaseException as exc:
        _failed(result, exc)
        builder.progress.finish(result)
        raise
    if not component.tested:
        builder.progress.finish(result)


def _tests(builder: Builder, result: ComponentResult, component: ComponentPlan) -> None:
    try:
        builder.run_tests(component, result)
    except Cancelled:
        raise  # its entry is in the store, as its status says; its tests say they were stopped
    except BaseException as exc:
        _failed(result, exc)
        raise
    finally:
        builder.progress.finish(result)


def _failed(result: ComponentResult, exc: BaseException) -> None:
    if isinstance(exc, Cancelled):
        result.status = "interrupted"
    elif isinstance(exc, StackError):
        result.status = "failed"
        result.error = exc.message


def _stop(
    builder: Builder,
    running: dict[Future[None], tuple[ComponentPlan, int]],
    results: dict[str, ComponentResult],
    signum: int,
) -> Interrupted:
    """Stop every running component's processes and wait for its worker to notice."""
    builder.cancelled.set()
    # A component whose tests run (no job tokens) is built: its tests are what stops.
    what = {
        c.name: _current_step(results[c.name]) if jobs else "tests" for c, jobs in running.values()
    }
    if what:
        builder.progress.note(
            "stopping " + ", ".join(f"{c} ({s})" for c, s in what.items()) + " ..."
        )
    futures = list(running)
    while not all(f.done() for f in futures):
        builder.children.terminate_all()  # again: a worker may have just started a step
        wait(futures, timeout=0.1)
    for c, jobs in running.values():
        if jobs:
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
) -> list[ComponentPlan]:
    """Store hits cost a stat: settle them at once, in order, without taking a slot; returns
    the hits whose own tests are to run on the entry."""
    tested: list[ComponentPlan] = []
    for c in list(pending):
        if set(c.depends) <= done and store.has(c.key):
            results[c.name].status = "hit"
            results[c.name].prefix = str(c.prefix)
            done.add(c.name)
            pending.remove(c)
            if c.tested:
                tested.append(c)
    return tested
