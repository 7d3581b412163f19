"""``infini-stack preflight``: can this host build (or run) a vendor's stack? Exit 3 if not."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from builder import preflight
from builder.commands.common import (
    add_home,
    add_json,
    add_manifest,
    add_vendor,
    check_components,
    layout_from,
    print_json,
    stack_from,
)
from builder.manifest import resolve_vendor
from builder.providers import linked
from builder.vendors.base import HostFacts

NAME = "preflight"
HELP = "check, in seconds, that this host has what a vendor's build (or run) needs"


def configure(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)
    add_vendor(parser)
    add_home(parser)
    add_json(parser)
    parser.add_argument(
        "--for",
        dest="purpose",
        choices=("build", "run"),
        default="build",
        help="what to check for: compiling (default) or running",
    )
    parser.add_argument(
        "--component",
        "-c",
        action="append",
        default=[],
        metavar="NAME",
        help="only what this component and its dependencies need; repeatable",
    )
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the interpreter the stack is built for (default: this one)",
    )
    parser.add_argument(
        "--linked",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="linked providers to check (JSON/YAML, see builder.providers.linked); repeatable",
    )


def light_host(python: str | None) -> HostFacts:
    """The host facts preflight reads (interpreter, environment): no compiler or toolkit runs
    here, the providers do that themselves."""
    return HostFacts(
        python=python or sys.executable,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        soabi="",
        pybind11_dir=None,
        cpu_count=os.cpu_count() or 1,
        env=dict(os.environ),
    )


def run(args: argparse.Namespace) -> int:
    stack = stack_from(args)
    vendor = resolve_vendor(stack, args.vendor)
    check_components(stack, vendor, args.component)
    specs = tuple(spec for path in args.linked for spec in linked.load(path))
    host = light_host(args.python)
    report = preflight.check(
        stack,
        vendor,
        host,
        tuple(args.component),
        purpose=args.purpose,
        linked=specs,
        wheel=not args.component,
    )
    preflight.record(report, layout_from(args))
    if args.json:
        print_json(report.to_json())
    else:
        print(report.table())
    if not report.ok:
        raise report.error()
    return 0
