"""Build a plan: fetch what the store lacks, execute, write the run report, print the summary.

:func:`run_build` is the ``build`` command's whole job, memo included; :func:`build_plan` is
the stage ``wheel`` and ``release`` share. Unchanged builds never get here (:mod:`builder.noop`
settles them).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from builder.core import proc
from builder.core.errors import UsageError
from builder.core.host import HostFacts
from builder.core.layout import Layout
from builder.engine import executor, memo
from builder.engine import report as run_report
from builder.engine.store import Store
from builder.pipeline.context import (
    Context,
    fetcher_for,
    open_context,
    plan_for,
    require_preflight,
)
from builder.pipeline.requests import BuildRequest
from builder.plan import ComponentPlan, Plan

LAUNCHERS = ("ccache", "sccache")


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
    )
    if request.memo and request.argv is not None:
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
) -> run_report.RunReport:
    """Fetch what is not in the store, build it, write the run report, print the summary."""
    report = run_report.RunReport(
        command=command,
        vendor=ctx.vendor,
        manifest=str(ctx.stack.file),
        providers=dict(ctx.host.providers),
        host=host_summary(ctx.host),
    )
    progress = progress or run_report.progress_for()
    try:
        with executor.interrupts():
            _fetch(ctx, plan)
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
    except executor.Interrupted as exc:
        report.interrupted = exc.message
        raise
    except KeyboardInterrupt:
        report.interrupted = "interrupted by SIGINT while fetching sources"
        raise
    finally:
        progress.close()
        _finish(report, ctx.layout)
    return report


def _fetch(ctx: Context, plan: Plan) -> None:
    """Every source first: a bad pin fails before any compile."""
    from builder.manifest.model import GitSource

    store = Store(ctx.layout)
    missing = [
        c for c in plan.components if isinstance(c.source, GitSource) and not store.has(c.key)
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
    path = run_report.write(report, layout)
    print(run_report.summary_table(report.to_json()), file=sys.stderr)
    print(f"run report: {path}", file=sys.stderr)
