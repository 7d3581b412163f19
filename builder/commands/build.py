"""``infini-stack build``: fetch, then build each component into the store (hits cost a stat)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from builder import build as executor
from builder import memo, proc
from builder import report as run_report
from builder.commands.common import (
    Context,
    add_bundle,
    add_mirror,
    add_plan_options,
    context_from,
    fetcher_for,
    plan_from,
    require_preflight,
)
from builder.layout import Layout
from builder.plan import ComponentPlan, Plan

NAME = "build"
HELP = "build the stack for a vendor in dependency order (store hits cost nothing)"
LAUNCHER_ENV = "INFINI_STACK_LAUNCHER"
LAUNCHERS = ("ccache", "sccache")


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    add_bundle(parser)
    parser.add_argument(
        "--launcher",
        default=os.environ.get(LAUNCHER_ENV, "auto"),
        help="compiler launcher for C, C++ and CUDA: auto (ccache, else sccache, when found), "
        f"none, or a program (default: ${LAUNCHER_ENV} or auto); not part of any cache key",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "plain", "live", "github", "quiet"),
        default="auto",
        help="progress output on stderr: auto (live lines on a terminal, fold groups under "
        "GitHub Actions, plain lines otherwise)",
    )
    parser.add_argument(
        "--keep-going",
        "-k",
        action="store_true",
        help="after a failure, go on building every component that does not depend on it",
    )
    parser.add_argument(
        "--no-memo",
        dest="memo",
        action="store_false",
        help="always load the manifest, probe the host and plan, even when nothing the last "
        "identical build read has changed (and leave no memo for the next)",
    )


def launcher_for(choice: str) -> str | None:
    if choice == "none":
        return None
    if choice == "auto":
        return next((found for p in LAUNCHERS if (found := proc.which(p))), None)
    found = proc.which(choice)
    if found is None:
        from builder.errors import UsageError

        raise UsageError(
            f"compiler launcher not found: {choice}",
            hint="install it, give its path, or pass --launcher none",
        )
    return found


def run(args: argparse.Namespace) -> int:
    """Plan and build; unchanged builds never get here (:mod:`builder.noop` settles them)."""
    since = time.time_ns()
    ctx = context_from(args)
    require_preflight(ctx, tuple(args.component or ()))
    plan = plan_from(args, ctx)
    argv = getattr(args, "argv", None)  # the command line, as cli.main saw it
    if argv is not None:
        memo.forget(argv, ctx.layout)  # until this build has succeeded
    report = build_plan(
        ctx,
        plan,
        launcher=launcher_for(args.launcher),
        progress=run_report.progress_for(args.progress),
        keep_going=args.keep_going,
    )
    if args.memo and argv is not None:
        memo.leave(
            argv,
            ctx.layout,
            plan,
            ctx.host,
            report,
            since_ns=since,
            extra_files=[str(Path.cwd() / "stack.yaml"), *provider_files(ctx)],
            manifest_arg=args.manifest,
        )
    return 0


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
        host=_host_summary(ctx.host),
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
    from builder.model import GitSource

    store = executor.Store(ctx.layout)
    missing = [
        c for c in plan.components if isinstance(c.source, GitSource) and not store.has(c.key)
    ]
    if missing:
        fetcher = fetcher_for(ctx)
        for c in missing:
            fetcher.checkout(c)


def _path_digest(component: ComponentPlan) -> str | None:
    from builder.sources import tree_digest

    return f"path:{tree_digest(component.source_dir)}"


def _host_summary(host: object) -> dict[str, object]:
    from builder.vendors.base import HostFacts

    assert isinstance(host, HostFacts)
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
