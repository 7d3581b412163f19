"""``infini-stack build``: fetch, then build each component into the store (hits cost a stat)."""

from __future__ import annotations

import argparse

from builder.commands.common import add_build_options, build_request


def configure(parser: argparse.ArgumentParser) -> None:
    add_build_options(parser)
    parser.add_argument(
        "--keep-going",
        "-k",
        action="store_true",
        help="after a failure, go on building every component that does not depend on it",
    )
    parser.add_argument(
        "--no-memo",
        dest="memo",
        action="store_false",
        help="always load the manifest, probe the host and plan, even when nothing the last "
        "identical build read has changed (and leave no memo for the next)",
    )


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.build import run_build

    run_build(build_request(args))
    return 0
