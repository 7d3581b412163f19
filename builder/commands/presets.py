"""``infini-stack presets``: reproduce one component's build by hand (an IDE, a debugger)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.build import launcher_for
from builder.commands.common import (
    add_home,
    add_jobs,
    add_manifest,
    add_vendor,
    context_from,
    plan_from,
)

NAME = "presets"
HELP = "write CMakePresets.json and build.sh that build one component as the tool does"


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
    from builder import presets
    from builder.store import Store

    args.component = [args.component]
    ctx = context_from(args)
    plan = plan_from(args, ctx)
    component = plan.get(args.component[0])
    out = (args.out or ctx.layout.presets(ctx.vendor, component.name)).resolve()
    hand = presets.HandBuild(
        component=component, out=out, jobs=plan.jobs, launcher=launcher_for(args.launcher)
    )
    preset_file, script_file = presets.write(hand)
    sys.stdout.write(presets.script(hand))
    sys.stdout.flush()
    store = Store(ctx.layout)
    missing = [d.name for d in plan.components if d.name != component.name and not store.has(d.key)]
    print(f"wrote {preset_file}\nwrote {script_file}", file=sys.stderr)
    print(
        f"use: sh {script_file}, or put {preset_file.name} in {component.cmake_source} "
        f"(as CMakeUserPresets.json) and run `cmake --preset {hand.name}`; a file added to a "
        "path source changes its key",
        file=sys.stderr,
    )
    if missing:
        print(
            f"note: not in the store yet: {', '.join(missing)}; build them first with "
            f"`infini-stack build --vendor {ctx.vendor} --component {component.name}`",
            file=sys.stderr,
        )
    return 0
