"""``infini-stack publish``: upload a verified release to a PyPI-compatible repository."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "release_dir", type=Path, metavar="DIR", help="a release directory `release` wrote"
    )
    parser.add_argument(
        "--repository",
        "-r",
        required=True,
        metavar="URL",
        help="the repository's upload URL (https://upload.pypi.org/legacy/, a pypiserver's "
        "root), or the name of a section of ~/.pypirc",
    )


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.publish import publish

    publish(args.release_dir, args.repository)
    return 0
