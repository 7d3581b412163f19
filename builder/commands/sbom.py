"""``infini-stack sbom``: a CycloneDX SBOM of the stack as built, the one its wheel carries."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from builder import sbom
from builder.commands.common import add_mirror, add_plan_options, context_from
from builder.commands.wheel import epoch_for, wheel_inputs, wheel_plan
from builder.errors import UsageError
from builder.store import Store
from wheels.assemble import stage

NAME = "sbom"
HELP = "write a CycloneDX SBOM (JSON) of the vendor's stack as built"


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_mirror(parser)
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        default=None,
        help="write the SBOM here (default: standard output)",
    )


def run(args: argparse.Namespace) -> int:
    sbom.require()
    ctx = context_from(args)
    plan = wheel_plan(args, ctx)
    store = Store(ctx.layout)
    missing = [c.name for c in plan.components if not store.has(c.key)]
    if missing:
        raise UsageError(
            f"not built for {ctx.vendor}: {', '.join(missing)} (an SBOM describes the stack "
            "as built)",
            hint=f"run `infini-stack build --vendor {ctx.vendor}` (or `wheel`) first",
        )
    inputs = wheel_inputs(ctx, plan, epoch_for(ctx, plan))
    with tempfile.TemporaryDirectory(prefix="infini-sbom-") as tmp:
        root = Path(tmp)
        requires = stage(inputs, root)  # exactly what the wheel would carry
        document = sbom.document(plan, inputs, root, requires)
    if args.output is None:
        sys.stdout.write(document)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(document, encoding="utf-8")
        print(args.output)
    return 0
