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
# Not every module exists yet while the tool grows; missing ones are skipped quietly.


def load_all() -> list[Command]:
    commands: list[Command] = []
    for name in MODULES:
        try:
            module = importlib.import_module(f"builder.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"builder.commands.{name}":
                raise
            continue
        commands.append(module)
    return commands
