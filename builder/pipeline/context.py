"""The context a command works in: the stack, the vendor, where state lives, the host as
preflight saw it (probed once per command), and how sources are reached."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core import host as host_facts
from builder.core.errors import UsageError
from builder.core.layout import Layout
from builder.pipeline.requests import PlanRequest, StackRequest

if TYPE_CHECKING:
    from builder.core.host import HostFacts
    from builder.core.sanitize import Profile
    from builder.manifest.model import Stack
    from builder.plan import Plan
    from builder.preflight import PreflightReport
    from builder.sources.fetch import Fetcher

# The manifest loader (PyYAML, packaging) and sources are imported where they are used: every
# command's imports are paid on each run.


@dataclass(frozen=True)
class Context:
    stack: Stack
    vendor: str
    layout: Layout
    host: HostFacts
    mirrors: dict[str, str]
    bundle: Path | None = None  # sources come from this bundle only (no network)
    preflight: PreflightReport | None = None  # what planning saw of the host's providers


def load_stack(manifest: Path | None) -> Stack:
    from builder.manifest.loader import default_manifest, load_stack

    return load_stack(manifest or default_manifest())


def layout_for(home: Path | None = None, store: Path | None = None) -> Layout:
    return Layout.from_env(home=home, store=store)


def detect_host(layout: Layout) -> HostFacts:
    return host_facts.detect(os.environ, cache=layout.cache())


def preflighted_host(
    stack: Stack, vendor: str, layout: Layout, *, wheel: bool = False
) -> tuple[HostFacts, PreflightReport]:
    """Host facts with every component's provider fingerprints and hints, as keys need them.

    All components are probed whatever is selected, so a component's key never depends on
    which others were asked for; only the failures that matter to the selection stop a build.
    ``wheel`` adds what packaging the vendor's wheel needs, so that a wheel or a release
    probes the host once.
    """
    from builder import preflight

    host = detect_host(layout)
    report = preflight.check(stack, vendor, host, wheel=wheel, cache=layout.cache())
    return report.apply_to(host), report


def open_context(request: StackRequest, *, wheel: bool = False) -> Context:
    """Load the manifest, resolve the vendor, probe the host (once): what a command works in."""
    from builder.manifest.loader import resolve_vendor
    from builder.sources.fetch import parse_mirrors

    stack = load_stack(request.manifest)
    vendor = resolve_vendor(stack, request.vendor)
    if request.worktrees:
        from builder.sources import worktree

        stack = worktree.apply(stack, vendor, request.worktrees)
    layout = layout_for(request.home, request.store)
    mirrors = {**stack.mirrors, **parse_mirrors(request.mirrors)}
    host, report = preflighted_host(stack, vendor, layout, wheel=wheel)
    bundle = request.bundle.expanduser().resolve() if request.bundle else None
    return Context(stack, vendor, layout, host, mirrors, bundle=bundle, preflight=report)


def require_preflight(ctx: Context, select: tuple[str, ...] = (), *, wheel: bool = False) -> None:
    """Stop before any compile when a provider the selected components (and the wheel, when
    ``wheel``) need is missing."""
    from builder import preflight

    check_components(ctx.stack, ctx.vendor, select)  # an unknown name: a usage error, first
    report = ctx.preflight
    if report is None:
        return
    preflight.record(report, ctx.layout)
    wanted = [*ctx.stack.closure(select, ctx.vendor), *(["wheel"] if wheel else [])]
    failures = report.failures_for(wanted if select else ())
    if failures:
        raise report.error(failures)


def fetcher_for(ctx: Context) -> Fetcher:
    """The fetcher for this context: from its bundle (imported first, no network) or online."""
    from builder.sources.fetch import Fetcher

    if ctx.bundle is not None:
        from builder.sources.bundle import offline_fetcher

        return offline_fetcher(ctx.bundle, ctx.layout)
    return Fetcher(ctx.layout, ctx.mirrors)


def check_components(stack: Stack, vendor: str, names: Iterable[str]) -> None:
    """Every one of ``names`` is a component of ``vendor``'s stack; else a UsageError naming it."""
    from builder.manifest.schema import unknown_message

    for name in names:
        if name not in stack.components:
            raise UsageError(unknown_message("component", name, stack.components))
        if not stack.components[name].in_stack(vendor):
            only = ", ".join(sorted(stack.components[name].only or ()))
            raise UsageError(
                f"component '{name}' is not in {vendor}'s stack ({stack.label} gives it only "
                f"for {only})"
            )


def plan_for(ctx: Context, request: PlanRequest) -> Plan:
    """The plan of the requested components (and what they depend on) in this context."""
    from builder.plan import make_plan
    from builder.sources.fetch import gather

    check_components(ctx.stack, ctx.vendor, request.components)
    names = ctx.stack.selected(ctx.vendor, request.components)
    return make_plan(
        ctx.stack,
        ctx.vendor,
        ctx.host,
        gather(ctx.stack, ctx.vendor, names),
        ctx.layout,
        select=request.components,
        tests=request.tests,
        suites=request.suites,
        jobs=request.jobs,
        sanitize=sanitize_profile(ctx, request),
    )


def sanitize_profile(ctx: Context, request: PlanRequest) -> Profile | None:
    """The sanitizer profile of the request: --sanitize, else the vendor's in stack.yaml."""
    from builder.core.sanitize import parse

    spec = request.sanitize
    return parse(spec if spec is not None else ctx.stack.vendors[ctx.vendor].sanitize)


def wheel_components(ctx: Context) -> tuple[str, ...]:
    """What the vendor's wheel is made of: its component and the bundled ones."""
    spec = ctx.stack.wheel
    if spec is None:
        raise UsageError(f"{ctx.stack.label} has no 'wheel' section")
    return (spec.component, *spec.bundle)
