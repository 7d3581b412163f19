"""Options shared by subcommands, and the context they build from them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder import host as host_facts
from builder.layout import Layout

if TYPE_CHECKING:
    from builder.model import Stack
    from builder.plan import Plan
    from builder.preflight import PreflightReport
    from builder.sources import Fetcher
    from builder.vendors.base import HostFacts

# The manifest loader (PyYAML, packaging) and sources are imported where they are used: a no-op
# build decided from its memo never needs them, and every command's import is paid on each run.


def add_manifest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest",
        "-m",
        type=Path,
        default=None,
        help="stack.yaml to use (default: $INFINI_STACK_MANIFEST, ./stack.yaml, "
        "else the bundled mini stack)",
    )


def add_vendor(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument(
        "--vendor", "-V", required=required, help="cpu, nvidia, moore or thead (alias ali)"
    )


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="state directory (default: $INFINI_STACK_HOME or $XDG_CACHE_HOME/infini-stack)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="store directory (default: $INFINI_STACK_STORE or HOME/store)",
    )


def add_mirror(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="URL=DIR",
        help="fetch URL (or any URL starting with it) from DIR instead; repeatable",
    )


def add_bundle(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bundle",
        type=Path,
        default=None,
        metavar="FILE",
        help="take every source from FILE (made by `infini-stack bundle`), "
        "checking each SHA; the network is not used",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print data as JSON")


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)
    add_vendor(parser)
    add_home(parser)
    parser.add_argument(
        "--component",
        "-c",
        action="append",
        default=[],
        metavar="NAME",
        help="only this component and what it depends on; repeatable",
    )
    parser.add_argument(
        "--test", action="store_true", help="build with the recipes' tests enabled and run them"
    )
    add_jobs(parser)


def add_jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=None,
        help="parallel compile jobs (default: the number of cores)",
    )


@dataclass(frozen=True)
class Context:
    stack: Stack
    vendor: str
    layout: Layout
    host: HostFacts
    mirrors: dict[str, str]
    bundle: Path | None = None  # sources come from this bundle only (no network)
    preflight: PreflightReport | None = None  # what planning saw of the host's providers


def stack_from(args: argparse.Namespace) -> Stack:
    from builder.manifest import default_manifest, load_stack

    return load_stack(args.manifest or default_manifest())


def layout_from(args: argparse.Namespace) -> Layout:
    return Layout.from_env(home=getattr(args, "home", None), store=getattr(args, "store", None))


def detect_host(layout: Layout) -> HostFacts:
    return host_facts.detect(os.environ, cache=layout.cache())


def preflighted_host(
    stack: Stack, vendor: str, layout: Layout
) -> tuple[HostFacts, PreflightReport]:
    """Host facts with every component's provider fingerprints and hints, as keys need them.

    All components are probed whatever is selected, so a component's key never depends on
    which others were asked for; only the failures that matter to the selection stop a build.
    """
    from builder import preflight

    host = detect_host(layout)
    report = preflight.check(stack, vendor, host)
    return report.apply_to(host), report


def require_preflight(ctx: Context, select: tuple[str, ...] = ()) -> None:
    """Stop before any compile when a provider the selected components need is missing."""
    from builder import preflight

    report = ctx.preflight
    if report is None:
        return
    preflight.record(report, ctx.layout)
    failures = report.failures_for(ctx.stack.closure(select, ctx.vendor) if select else ())
    if failures:
        raise report.error(failures)


def context_from(args: argparse.Namespace) -> Context:
    from builder import sources
    from builder.manifest import resolve_vendor

    stack = stack_from(args)
    vendor = resolve_vendor(stack, args.vendor)
    layout = layout_from(args)
    mirrors = dict(stack.mirrors)
    mirrors.update(sources.parse_mirrors(getattr(args, "mirror", []) or []))
    bundle = getattr(args, "bundle", None)
    host, report = preflighted_host(stack, vendor, layout)
    return Context(
        stack=stack,
        vendor=vendor,
        layout=layout,
        host=host,
        mirrors=mirrors,
        bundle=bundle.expanduser().resolve() if bundle else None,
        preflight=report,
    )


def fetcher_for(ctx: Context) -> Fetcher:
    """The fetcher for this context: from its bundle (imported first, no network) or online."""
    from builder import sources

    if ctx.bundle is not None:
        from builder.bundle import offline_fetcher

        return offline_fetcher(ctx.bundle, ctx.layout)
    return sources.Fetcher(ctx.layout, ctx.mirrors)


def check_components(stack: Stack, vendor: str, names: Iterable[str]) -> None:
    """Every one of ``names`` is a component of ``vendor``'s stack; else a UsageError naming it."""
    from builder.errors import UsageError
    from builder.schema import unknown_message

    for name in names:
        if name not in stack.components:
            raise UsageError(unknown_message("component", name, stack.components))
        if not stack.components[name].in_stack(vendor):
            only = ", ".join(sorted(stack.components[name].only or ()))
            raise UsageError(
                f"component '{name}' is not in {vendor}'s stack ({stack.label} gives it only "
                f"for {only})"
            )


def plan_from(args: argparse.Namespace, ctx: Context) -> Plan:
    from builder import sources
    from builder.plan import make_plan

    select = tuple(args.component or ())
    check_components(ctx.stack, ctx.vendor, select)
    names = ctx.stack.selected(ctx.vendor, select)
    inputs = sources.gather(ctx.stack, ctx.vendor, names)
    return make_plan(
        ctx.stack,
        ctx.vendor,
        ctx.host,
        inputs,
        ctx.layout,
        select=select,
        tests=bool(getattr(args, "test", False)),
        jobs=getattr(args, "jobs", None),
    )


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
