"""``infini-stack validate``: check the manifest and its recipes, nothing else."""

from __future__ import annotations

import argparse

from builder.commands.common import add_manifest, stack_from

NAME = "validate"
HELP = "check stack.yaml and the component recipes (every problem, located)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)


def run(args: argparse.Namespace) -> int:
    stack = stack_from(args)
    vendors = ", ".join(stack.vendors)
    print(
        f"{stack.label}: ok ({len(stack.components)} components: {', '.join(stack.order)}; "
        f"vendors: {vendors})"
    )
    return 0
