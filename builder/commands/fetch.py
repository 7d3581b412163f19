"""``infini-stack fetch``: bring every pinned source of a vendor's stack into its build tree."""

from __future__ import annotations

import argparse

from builder import sources
from builder.commands.common import (
    add_bundle,
    add_mirror,
    add_plan_options,
    context_from,
    fetcher_for,
    plan_from,
)
from builder.model import GitSource

NAME = "fetch"
HELP = "fetch and verify the pinned sources (shared bare cache, one checkout per build)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    add_bundle(parser)


def run(args: argparse.Namespace) -> int:
    ctx = context_from(args)
    plan = plan_from(args, ctx)
    offline = None
    if ctx.bundle is not None:
        from builder.bundle import needed_pins

        fetcher = fetcher_for(ctx)
        needed_pins(plan, fetcher)  # every SHA the manifest needs, all missing ones named at once
        offline = fetcher.offline
    trees = sources.prepare(plan.components, ctx.layout, ctx.mirrors, offline=offline)
    for c in plan.components:
        what = c.source.rev if isinstance(c.source, GitSource) else "path source"
        print(f"{c.name:<12} {what}  {trees[c.name]}")
    return 0
