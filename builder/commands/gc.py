"""``infini-stack gc``: remove what no given manifest's plan uses, and what killed builds left
(see :mod:`builder.engine.gc`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.commands.common import add_home, layout_from


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest",
        "-m",
        type=Path,
        action="append",
        default=[],
        help="a stack.yaml whose every vendor's plan is kept; repeatable (default: the one "
        "other commands use)",
    )
    add_home(parser)
    parser.add_argument(
        "--dry-run", "-n", action="store_true", help="print what would be removed; remove nothing"
    )


def run(args: argparse.Namespace) -> int:
    from builder.core.diskspace import size_text
    from builder.pipeline.gc import collect_garbage

    outcome = collect_garbage(args.manifest, layout_from(args), dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for d in outcome.removed:
        print(f"{verb} {d.what}: {d.path} ({size_text(d.size)})")
    for d in outcome.in_use:
        print(f"kept {d.what} in use: {d.path}")
    freed = size_text(sum(d.size for d in outcome.removed))
    kept = outcome.kept_entries
    print(
        f"{verb} {len(outcome.removed) + len(outcome.in_use)} item(s), "
        f"{'would free' if args.dry_run else 'freed'} {freed}; "
        f"{kept} store entr{'y' if kept == 1 else 'ies'} kept"
    )
    return 0
