"""``infini-stack release``: the release gate; writes the release directory whole or not at all."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.commands.build import configure as configure_build
from builder.release import run_release

NAME = "release"
HELP = (
    "preflight, build, reproducible wheel, audit, smoke, SBOM and SHA256SUMS into a "
    "directory, or nothing"
)


def configure(parser: argparse.ArgumentParser) -> None:
    configure_build(parser)
    parser.add_argument(
        "--output",
        "-o",
        dest="release_dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="the release directory: must not exist or be empty",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="release the manylinux wheel auditwheel repair makes (never "
        "grafting the vendor's libraries), audited again",
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="build the wheel once (skip the second, fresh build)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail when the vendor's runtime is absent from this host, so that "
        "the smoke test could not load every file",
    )


def run(args: argparse.Namespace) -> int:
    out = run_release(args, args.release_dir)
    print(out)
    return 0
