"""``infini-stack smoke``: install a wheel into a fresh venv and load every ELF in it with
immediate symbol binding, without a device."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.checks.smoke import smoke
from builder.commands.common import add_sanitize, print_json, sanitize_of
from builder.core.errors import EXIT_AUDIT


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    parser.add_argument(
        "--vendor",
        "-V",
        default=None,
        help="whose runtime libraries may be absent here (default: from the "
        "wheel's local version, +cpu, +cu130 ...)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail also when the vendor's runtime is absent from this host, so "
        "that some files could not be loaded",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_sanitize(parser, wheel=True)


def run(args: argparse.Namespace) -> int:
    from builder.vendors import canonical_name

    vendor = canonical_name(args.vendor) if args.vendor else None
    sanitize = sanitize_of(args)
    results = [smoke(wheel, vendor, sanitize=sanitize) for wheel in args.wheels]
    if args.json:
        print_json([r.to_json() for r in results])
    else:
        print("\n".join(r.render() for r in results))
    passed = all(r.complete if args.strict else r.ok for r in results)
    return 0 if passed else EXIT_AUDIT
