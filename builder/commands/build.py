"""``infini-stack build``: fetch, preflight, then build each component into the store."""

from __future__ import annotations

import argparse
import sys

from builder import build as executor
from builder import proc, sources
from builder import report as run_report
from builder.commands.common import (
    Context,
    add_mirror,
    add_plan_options,
    context_from,
    plan_from,
)
from builder.model import GitSource
from builder.plan import Plan

NAME = "build"
HELP = "build the stack for a vendor in dependency order (store hits cost nothing)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    parser.add_argument("--launcher", default="auto",
                        help="compiler launcher: auto (ccache or sccache when found), none, "
                        "or a program")


def launcher_for(choice: str) -> str | None:
    if choice == "none":
        return None
    if choice == "auto":
        return next((p for p in ("ccache", "sccache") if proc.which(p)), None)
    return choice


def run(args: argparse.Namespace) -> int:
    ctx = context_from(args)
    plan = plan_from(args, ctx)
    build_plan(ctx, plan, launcher=launcher_for(args.launcher))
    return 0


def build_plan(ctx: Context, plan: Plan, *, launcher: str | None = None,
               command: str = "build") -> run_report.RunReport:
    """Fetch what is not in the store, build it, write the run report, print the summary."""
    report = run_report.RunReport(command=command, vendor=ctx.vendor, manifest=str(ctx.stack.file),
                                  providers=dict(ctx.host.providers))
    fetcher = sources.Fetcher(ctx.layout, ctx.mirrors)
    store = executor.Store(ctx.layout)
    for c in plan.components:  # every source first: a bad pin fails before any compile
        if isinstance(c.source, GitSource) and not store.has(c.key):
            fetcher.checkout(c)
    try:
        executor.execute(plan, ctx.layout, report, launcher=launcher)
    finally:
        path = run_report.write(report, ctx.layout)
        print(run_report.summary_table(report.to_json()), file=sys.stderr)
        print(f"run report: {path}", file=sys.stderr)
    return report
