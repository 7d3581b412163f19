"""CLI subcommands: one module each, exposing NAME, HELP, configure(parser) and run(args) -> int.

Add a subcommand by writing its module and naming it in ``MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Protocol


class Command(Protocol):
    NAME: str
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


MODULES: tuple[str, ...] = (
    "validate",
    "plan",
    "preflight",
    "fetch",
    "build",
    "presets",
    "report",
    "gc",
    "wheel",
    "audit",
    "bundle",
    "lock",
    "ci",
    "sbom",
    "smoke",
    "release",
)


def load(names: tuple[str, ...] = MODULES) -> list[Command]:
    """Import the named subcommand modules (each costs its imports on every run)."""
    return [importlib.import_module(f"builder.commands.{name}") for name in names]


def chosen(argv: list[str]) -> tuple[str, ...]:
    """Just the subcommand on the command line when there is a known one, else all of them."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return (first,) if first in MODULES else MODULES
