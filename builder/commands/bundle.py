"""``infini-stack bundle``: every pinned source of a vendor's stack in one file, for hosts
without the network (``fetch --bundle FILE`` and ``build --bundle FILE`` use it there)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.common import add_mirror, add_plan_options, plan_request, stack_request


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
    from builder.pipeline.fetch import bundle_sources
    from builder.sources import bundle

    out = args.output.expanduser().resolve()
    plan, index = bundle_sources(stack_request(args), plan_request(args), out)
    for line in bundle.describe(index):
        print(line)
    skipped = [c.name for c in plan.components if c.name not in {p.component for p in index.pins}]
    if skipped:
        print(f"not bundled (path sources): {', '.join(skipped)}", file=sys.stderr)
    print(out)
    return 0
