"""``infini-stack check``: run the vendor's runtime check against a built wheel."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.common import add_check_jobs, add_manifest, add_sanitize, sanitize_of


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheel", type=Path, metavar="WHEEL", help="the wheel to check")
    add_manifest(parser)
    parser.add_argument(
        "--vendor", "-V", default=None, help="the wheel's vendor (default: from its version)"
    )
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the interpreter the wheel is for (default: this one); the check's venv sees "
        "what an install into it would see",
    )
    parser.add_argument(
        "--force-argmax",
        action="store_true",
        help="make the check's engine sample by argmax (INFINI_STACK_CHECK_FORCE_ARGMAX=1): its "
        "sampling statistics must then fail, and so must the check",
    )
    add_check_jobs(parser)
    add_sanitize(parser, wheel=True)


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.check import CheckRequest, failed, run_check_request

    result = run_check_request(
        CheckRequest(
            wheel=args.wheel,
            vendor=args.vendor,
            manifest=args.manifest,
            python=args.python,
            force_argmax=args.force_argmax,
            jobs=args.check_jobs,
            sanitize=sanitize_of(args),
        )
    )
    sys.stdout.write(result.log())
    print(result.render(), file=sys.stderr)
    if not result.ok:
        raise failed(result)
    return 0
