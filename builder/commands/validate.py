"""``infini-stack validate``: check the manifest and its recipes, nothing else."""

from __future__ import annotations

import argparse

from builder.commands.common import add_manifest
from builder.pipeline.context import load_stack


def configure(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)


def run(args: argparse.Namespace) -> int:
    stack = load_stack(args.manifest)
    vendors = ", ".join(stack.vendors)
    print(
        f"{stack.label}: ok ({len(stack.components)} components: {', '.join(stack.order)}; "
        f"vendors: {vendors})"
    )
    return 0
