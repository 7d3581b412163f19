"""``infini-stack sbom``: a CycloneDX SBOM of the stack as built, the one its wheel carries."""

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
        default=None,
        help="write the SBOM here (default: standard output)",
    )


def run(args: argparse.Namespace) -> int:
    from builder.core.fs import atomic_write
    from builder.pipeline.wheel import built_sbom

    document = built_sbom(stack_request(args), plan_request(args))
    if args.output is None:
        sys.stdout.write(document)
    else:
        atomic_write(args.output, document)
        print(args.output)
    return 0
