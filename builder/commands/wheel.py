"""``infini-stack wheel``: build (store hits are free), assemble the vendor's wheel, audit it,
and only then write it to ``--out``."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.commands.common import add_build_options, add_repair, add_variant, build_request


def configure(parser: argparse.ArgumentParser) -> None:
    add_build_options(parser)
    parser.add_argument(
        "--out",
        "-o",
        type=Path,
        default=Path("dist"),
        help="where the wheel is written (default: ./dist)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="build everything a second time from fresh build directories and "
        "require byte-identical wheels (names the first member that differs)",
    )
    add_repair(parser)
    add_variant(parser)


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.requests import WheelRequest
    from builder.pipeline.wheel import run_wheel

    request = WheelRequest(
        build=build_request(args),
        out=args.out,
        verify=args.verify,
        repair=args.repair,
        variant=args.variant,
    )
    for path in run_wheel(request):
        print(path)
    return 0
