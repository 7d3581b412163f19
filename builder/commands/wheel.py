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
    parser.add_argument(
        "--no-rebuild",
        action="store_true",
        help="a store entry whose files differ from its install manifest stops the run "
        "(exit 5) instead of being built again",
    )
    add_repair(parser)
    add_variant(parser)
    add_max_size(parser)


def add_max_size(parser: argparse.ArgumentParser) -> None:
    from builder.commands.audit import size_argument

    parser.add_argument(
        "--max-size",
        type=size_argument,
        default=None,
        metavar="SIZE",
        help="a wheel larger than SIZE (100MB, 95MiB, bytes) fails its audit "
        "(default: stack.yaml's wheel.max_size, else a warning above PyPI's 100 MB)",
    )


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.requests import WheelRequest
    from builder.pipeline.wheel import run_wheel

    request = WheelRequest(
        build=build_request(args),
        out=args.out,
        verify=args.verify,
        repair=args.repair,
        variant=args.variant,
        max_size=args.max_size,
        no_rebuild=args.no_rebuild,
    )
    for path in run_wheel(request):
        print(path)
    return 0
