"""``infini-stack ci matrix``: the GitHub Actions matrix of vendor x Python jobs from stack.yaml."""

from __future__ import annotations

import argparse
import json

from builder import ci
from builder.commands.common import add_manifest
from builder.pipeline.context import load_stack


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ci_command", metavar="WHAT", required=True)
    matrix = sub.add_parser(
        "matrix",
        help="the strategy.matrix for GitHub Actions (one line of JSON)",
        description='Print {"include": [{vendor, python, runs-on, container, session}]} for '
        "every vendor declared in the manifest (or those named).",
    )
    add_manifest(matrix)
    matrix.add_argument(
        "--vendor",
        "-V",
        action="append",
        default=[],
        metavar="V",
        help="only this vendor (aliases accepted); repeatable",
    )
    matrix.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="X.Y",
        help=f"Python version; repeatable (default: {', '.join(ci.DEFAULT_PYTHONS)})",
    )
    matrix.add_argument("--pretty", action="store_true", help="indent the JSON")


def run(args: argparse.Namespace) -> int:
    stack = load_stack(args.manifest)
    data = ci.matrix(stack, args.vendor, args.python)
    print(json.dumps(data, indent=2 if args.pretty else None))
    return 0
