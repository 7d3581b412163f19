"""Build a plan: pull what the store lacks from a remote cache, fetch what is still missing,
execute, push what was built, write the run report, print the summary.

:func:`run_build` is the ``build`` command's whole job, memo included; :func:`build_plan` is
the stage ``wheel`` and ``release`` share. Unchanged builds never get here (:mod:`builder.noop`
settles them).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core import diskspace, proc
from builder.core.errors import BuildError, StackError, UsageError
from builder.core.host import HostFacts
from builder.core.layout import Layout
from builder.core.redact import redact
from builder.engine import bound, executor, memo
from builder.engine import report as run_report
from builder.engine.store import Store
from builder.pipeline.context import (
    Context,
    fetcher_for,
    open_context,
    plan_for,
    require_preflight,
)
from builder.pipeline.integrity import check_plan
from builder.pipeline.requests import BuildRequest, CacheRequest
from builder.plan import ComponentPlan, Plan

if TYPE_CHECKING:
    from builder.pipeline.cache import Cache

LAUNCHERS = ("ccache", "sccache")
NO_CACHE_HINT = "give --cache URL, set $INFINI_STACK_CACHE, or list caches in stack.yaml's cache:"


def run_build(request: BuildRequest) -> run_report.RunReport:
    """Plan and build the request; leave a memo so that the same command line is a no-op."""
    since = time.time_ns()
    ctx = open_context(request.stack)
    require_preflight(ctx, request.plan.components)
    plan = plan_for(ctx, request.plan)
    if request.argv is not None:
        memo.forget(request.argv, ctx.layout)  # until this build has succeeded
    report = build_plan(
        ctx,
        plan,
        launcher=launcher_for(request.launcher),
        progress=run_report.progress_for(request.progress),
        keep_going=request.keep_going,
        cache=request.cache,
    )
    # No memo for a command line that carries a credential (it would be written down), or
    # whose push failed (the next identical build must try again).
    secret = redact(" ".join(request.argv or ())) != " ".join(request.argv or ())
    if (
        request.memo
        and request.argv is not None
        and not secret
        and report.cache.get("pushed_ok", True)
    ):
        memo.leave(
            request.argv,
            ctx.layout,
            plan,
            ctx.host,
            report,
            since_ns=since,
            extra_files=[str(Path.cwd() / "stack.yaml"), *provider_files(ctx)],
            manifest_arg=request.stack.manifest,
        )
    return report


def launcher_for(choice: str) -> str | None:
    """The compiler launcher ``choice`` names: none, auto (ccache, else sccache), or a program."""
    if choice == "none":
        return None
    if choice == "auto":
        return next((found for p in LAUNCHERS if (found := proc.which(p))), None)
    found = proc.which(choice)
    if found is None:
        raise UsageError(
            f"compiler launcher not found: {choice}",
            hint="install it, give its path, or pass --launcher none",
        )
    return found


def provider_files(ctx: Context) -> list[str]:
    """Files preflight found: the memo re-checks them, so a changed toolkit is no no-op."""
    report = ctx.preflight
    return [r.path for r in report.results if r.ok and r.path] if report else []


def build_plan(
    ctx: Context,
    plan: Plan,
    *,
    launcher: str | None = None,
    command: str = "build",
    progress: run_report.Progress | None = None,
    keep_going: bool = False,
    cache: CacheRequest | None = None,
    verify: bool = False,
    rebuild: bool = True,
) -> run_report.RunReport:
    """Pull what the store lacks from the remote cache (when ``cache`` names one), fetch what is
    still missing, build it, push what was built (``--push``), write the run report, print the
    summary.

    ``verify`` (and any push) checks the plan's entries against their install manifests first:
    a changed one is built again, or, without ``rebuild``, the build stops (exit 5). A full
    disk's error names the filesystem that filled."""
    with diskspace.named_when_full(ctx.layout.home, ctx.layout.store_root):
        report = _new_report(ctx, plan, command)
        progress = progress or run_report.progress_for()
        began = bound.mark()
        remote = _open_cache(ctx, cache)
        try:
            with executor.interrupts():
                _check_first(ctx, plan, remote, progress.say, verify=verify, rebuild=rebuild)
                pulled = _pull(remote, ctx, plan, progress)
                fetch_sources(ctx, plan)
                try:
                    executor.execute(
                        plan,
                        ctx.layout,
                        report,
                        launcher=launcher,
                        progress=progress,
                        env=ctx.host.env or None,
                        verify_sources=_path_digest,
                        keep_going=keep_going,
                    )
                except BuildError as exc:
                    if remote and not isinstance(exc, executor.Interrupted):
                        _push_after_failure(remote, ctx, plan, report, progress)
                    raise
                finally:
                    _mark_pulled(report, pulled, remote)
                if remote:
                    _push(remote, ctx, plan, report, progress)
        except executor.Interrupted as exc:
            report.interrupted = exc.message
            raise
        except KeyboardInterrupt:
            report.interrupted = "interrupted by SIGINT while fetching sources"
            raise
        finally:
            progress.close()
            report.cpu = bound.since(began)
            _finish(report, ctx.layout)
        return report


def _new_report(ctx: Context, plan: Plan, command: str) -> run_report.RunReport:
    return run_report.RunReport(
        command=command,
        vendor=ctx.vendor,
        manifest=str(ctx.stack.file),
        providers=dict(ctx.host.providers),
        host=host_summary(ctx.host),
        sanitize=plan.sanitize.spec if plan.sanitize else None,
    )


def _check_first(
    ctx: Context,
    plan: Plan,
    remote: Cache | None,
    say: Callable[[str, str], None],
    *,
    verify: bool,
    rebuild: bool,
) -> None:
    """The plan's entries against their install manifests, before packaging or pushing."""
    if verify or (remote is not None and remote.push):
        before = "to package" if verify else "to push"
        check_plan(ctx.layout, plan, say, rebuild=rebuild, before=before)


# The remote cache (builder.pipeline.cache: cryptography, zstandard, urllib) is imported only
# when a build uses one.


def _open_cache(ctx: Context, request: CacheRequest | None) -> Cache | None:
    if request is None:
        return None
    from builder.cache.urls import CACHE_ENV

    given = request.urls if request.urls is not None else os.environ.get(CACHE_ENV, "").strip()
    if not (given or (request.urls is None and ctx.stack.cache.urls) or request.push):
        if request.required:
            raise UsageError("--cache-required, but no cache is given", hint=NO_CACHE_HINT)
        return None
    from builder.pipeline.cache import open_cache

    return open_cache(request, ctx.stack.cache.urls, ctx.stack.cache.trust)


@dataclass(frozen=True)
class Pulled:
    entries: dict[str, dict[str, Any]]  # component -> where it came from
    seconds: float


def _pull(cache: Cache | None, ctx: Context, plan: Plan, progress: run_report.Progress) -> Pulled:
    if cache is None:
        return Pulled({}, 0.0)
    from builder.pipeline.cache import pull_missing

    start = time.monotonic()
    pulled = pull_missing(cache, plan, ctx.layout, progress.say)
    return Pulled(pulled, time.monotonic() - start)


def _mark_pulled(report: run_report.RunReport, pulled: Pulled, cache: Cache | None) -> None:
    if cache is None:
        return
    from builder.pipeline.cache import mark_pulled, summary

    mark_pulled(report, pulled.entries, pulled.seconds)
    report.cache = {**summary(cache), "pull_seconds": round(pulled.seconds, 3)}


def _push(
    cache: Cache,
    ctx: Context,
    plan: Plan,
    report: run_report.RunReport,
    progress: run_report.Progress,
) -> None:
    from builder.pipeline.cache import push_built, summary

    ok = push_built(cache, plan, ctx.layout, report, progress.say)
    report.cache = {**report.cache, **summary(cache), "pushed_ok": ok}


def _push_after_failure(
    cache: Cache,
    ctx: Context,
    plan: Plan,
    report: run_report.RunReport,
    progress: run_report.Progress,
) -> None:
    """Push what was built before a failure; a push that fails too is a warning, so the build's
    own error (and the log it names) is what the user sees."""
    try:
        _push(cache, ctx, plan, report, progress)
    except StackError as exc:
        progress.say("cache", f"warning: not pushed after the failure: {exc.message}")


def fetch_sources(ctx: Context, plan: Plan) -> None:
    """Every source first: a bad pin fails before any compile."""
    from builder.manifest.model import GitSource

    store = Store(ctx.layout)
    # A suite runs from the checkout: an entry from the store needs it too.
    missing = [
        c
        for c in plan.components
        if isinstance(c.source, GitSource)
        and (not store.has(c.key) or (c.suite is not None and not c.source_dir.is_dir()))
    ]
    if missing:
        fetcher = fetcher_for(ctx)
        for c in missing:
            fetcher.checkout(c)


def _path_digest(component: ComponentPlan) -> str | None:
    from builder.core.digest import tree_digest

    return f"path:{tree_digest(component.source_dir)}"


def host_summary(host: HostFacts) -> dict[str, object]:
    tk = host.toolkit
    return {
        "cxx": host.cxx,
        "cxx_version": host.cxx_version,
        "python": host.python,
        "cpu_count": host.cpu_count,
        "toolkit": {"root": str(tk.root), "version": tk.version, "found": tk.found} if tk else None,
    }


def _finish(report: run_report.RunReport, layout: Layout) -> None:
    print(run_report.summary_table(report.to_json()), file=sys.stderr)
    print(bound.render(report.cpu), file=sys.stderr)
    try:
        path = run_report.write(report, layout)
    except OSError as exc:  # a full disk: the build's own error is what must be seen
        print(f"warning: run report not written: {exc.strerror}", file=sys.stderr)
        return
    print(f"run report: {path}", file=sys.stderr)
