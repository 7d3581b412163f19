"""``infini-stack bundle``: every pinned source of a vendor's stack in one file, for hosts
without the network (``fetch --bundle FILE`` and ``build --bundle FILE`` use it there)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder import bundle
from builder.commands.common import add_mirror, add_plan_options, context_from, plan_from
from builder.sources import Fetcher

NAME = "bundle"
HELP = "write every pinned source of a vendor's stack (with submodules) into one file"


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        required=True,
        metavar="FILE",
        help="the bundle to write (a tar of git bundles with an index)",
    )


def run(args: argparse.Namespace) -> int:
    ctx = context_from(args)
    plan = plan_from(args, ctx)
    out = args.output.expanduser().resolve()
    index = bundle.write_bundle(plan, ctx.layout, Fetcher(ctx.layout, ctx.mirrors), out)
    for line in bundle.describe(index):
        print(line)
    skipped = [c.name for c in plan.components if c.name not in {p.component for p in index.pins}]
    if skipped:
        print(f"not bundled (path sources): {', '.join(skipped)}", file=sys.stderr)
    print(out)
    return 0
