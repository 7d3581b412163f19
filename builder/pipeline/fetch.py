"""Sources alone: check out a plan's pinned sources, or write them into a bundle."""

from __future__ import annotations

from pathlib import Path

from builder.manifest.model import GitSource
from builder.pipeline.context import fetcher_for, open_context, plan_for
from builder.pipeline.requests import PlanRequest, StackRequest
from builder.plan import Plan
from builder.sources import bundle
from builder.sources.fetch import Fetcher, prepare


def fetch_sources(stack: StackRequest, selection: PlanRequest) -> tuple[Plan, dict[str, Path]]:
    """Every planned component's source tree, checked out and verified (from the bundle, if the
    request names one: every SHA it lacks is named at once)."""
    ctx = open_context(stack)
    plan = plan_for(ctx, selection)
    offline = None
    if ctx.bundle is not None:
        fetcher = fetcher_for(ctx)
        bundle.needed_pins(plan, fetcher)
        offline = fetcher.offline
    contract = ctx.stack.contract
    if contract is not None and offline is None:  # pinned and fetched, never built
        source = GitSource(url=contract.url, rev=contract.rev)
        Fetcher(ctx.layout, ctx.mirrors).ensure_commit(
            contract.name, source, label=f"contract '{contract.name}'"
        )
    return plan, prepare(plan.components, ctx.layout, ctx.mirrors, offline=offline)


def bundle_sources(
    stack: StackRequest, selection: PlanRequest, out: Path
) -> tuple[Plan, bundle.BundleIndex]:
    """Every pinned source of the plan (with its submodules) written into the bundle ``out``."""
    ctx = open_context(stack)
    plan = plan_for(ctx, selection)
    return plan, bundle.write_bundle(plan, ctx.layout, Fetcher(ctx.layout, ctx.mirrors), out)
