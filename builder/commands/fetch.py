"""``infini-stack fetch``: bring every pinned source of a vendor's stack into its build tree."""

from __future__ import annotations

import argparse

from builder.commands.common import (
    add_bundle,
    add_mirror,
    add_plan_options,
    plan_request,
    stack_request,
)


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    add_bundle(parser)


def run(args: argparse.Namespace) -> int:
    from builder.manifest.model import GitSource
    from builder.pipeline.fetch import fetch_sources

    plan, trees = fetch_sources(stack_request(args), plan_request(args))
    for c in plan.components:
        what = c.source.rev if isinstance(c.source, GitSource) else "path source"
        print(f"{c.name:<12} {what}  {trees[c.name]}")
    contract = plan.stack.contract
    if contract is not None:
        print(f"{contract.name:<12} {contract.rev}  (the contract: fetched, not built)")
    return 0
