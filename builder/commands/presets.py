"""``infini-stack presets``: reproduce one component's build by hand (an IDE, a debugger)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.common import (
    add_home,
    add_jobs,
    add_manifest,
    add_vendor,
    stack_request,
)
from builder.pipeline.requests import PlanRequest


def configure(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)
    add_vendor(parser)
    add_home(parser)
    parser.add_argument(
        "--component", "-c", required=True, metavar="NAME", help="the component to reproduce"
    )
    parser.add_argument(
        "--out",
        "-o",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to write them (default: HOME/presets/COMPONENT-VENDOR); the "
        "hand build goes to DIR/build and installs to DIR/install",
    )
    parser.add_argument("--test", action="store_true", help="with the recipe's tests enabled")
    add_jobs(parser)
    parser.add_argument(
        "--launcher",
        default="none",
        help="compiler launcher to configure with: none (default), auto, or a program",
    )


def run(args: argparse.Namespace) -> int:
    from builder.engine import presets
    from builder.pipeline.presets import write_presets

    selection = PlanRequest(components=(args.component,), tests=args.test, jobs=args.jobs)
    written = write_presets(stack_request(args), selection, args.out, args.launcher)
    hand, name = written.hand, written.hand.component.name
    sys.stdout.write(presets.script(hand))
    sys.stdout.flush()
    print(f"wrote {written.preset_file}\nwrote {written.script_file}", file=sys.stderr)
    print(
        f"use: sh {written.script_file}, or put {written.preset_file.name} in "
        f"{hand.component.cmake_source} (as CMakeUserPresets.json) and run "
        f"`cmake --preset {hand.name}`; a file added to a path source changes its key",
        file=sys.stderr,
    )
    if written.unbuilt:
        print(
            f"note: not in the store yet: {', '.join(written.unbuilt)}; build them first with "
            f"`infini-stack build --vendor {written.vendor} --component {name}`",
            file=sys.stderr,
        )
    return 0
