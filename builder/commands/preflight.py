"""``infini-stack preflight``: can this host build (or run) a vendor's stack? Exit 3 if not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.common import (
    add_home,
    add_json,
    add_manifest,
    add_vendor,
    print_json,
    stack_request,
)
from builder.core.termwrap import terminal_width


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


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.preflight import run_preflight

    report = run_preflight(
        stack_request(args),
        tuple(args.component),
        purpose=args.purpose,
        python=args.python,
        linked_files=args.linked,
    )
    if args.json:
        print_json(report.to_json())
    else:
        print(report.table(terminal_width(sys.stdout)))
    if not report.ok:
        raise report.error()
    return 0
