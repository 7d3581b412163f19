"""``infini-stack inspect WHEEL``: print the ``stack-manifest.json`` a wheel carries (what it was
built from: the contract, each component's revision or working tree, patches, options, vendor,
CUDA architectures, operator selection)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheel", type=Path, metavar="WHEEL", help="a wheel built by this tool")


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.build_manifest import read_from_wheel

    sys.stdout.write(read_from_wheel(args.wheel))
    return 0
