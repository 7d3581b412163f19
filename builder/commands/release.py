"""``infini-stack release``: the release gate; writes the release directory whole or not at all."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.commands.common import (
    add_allow_worktree,
    add_build_options,
    add_check_jobs,
    add_repair,
    add_variant,
    build_request,
)
from builder.commands.wheel import add_max_size


def configure(parser: argparse.ArgumentParser) -> None:
    add_build_options(parser)
    parser.add_argument(
        "--output",
        "-o",
        dest="release_dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="the release directory: must not exist or be empty",
    )
    parser.add_argument(
        "--index",
        type=Path,
        metavar="ROOT",
        help="also merge the wheel into the static package index under ROOT "
        "(ROOT/<vendor label>/simple/, PEP 503 and PEP 691); files already there are kept",
    )
    add_repair(parser)
    add_variant(parser)
    add_max_size(parser)
    add_allow_worktree(parser)
    add_check_jobs(parser)
    parser.add_argument(
        "--python",
        dest="pythons",
        action="append",
        default=[],
        metavar="X.Y|PATH",
        help="a CPython to make a wheel for (repeatable: one wheel each, from one build of the "
        "components that do not use Python); found on PATH, in pyenv, or given as a path; "
        "default: stack.yaml's wheel.pythons, else the interpreter infini-stack runs under",
    )
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="build the wheel once (skip the second, fresh build)",
    )
    parser.add_argument(
        "--reverify",
        action="store_true",
        help="build the second time even when an earlier release built the same inputs twice "
        "and this wheel is the same bytes (that proof stands otherwise)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail when the vendor's runtime or device is absent from this host, so that "
        "the smoke test could not load every file or the runtime check could not run",
    )


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.release import run_release
    from builder.pipeline.requests import ReleaseRequest

    request = ReleaseRequest(
        build=build_request(args),
        output=args.release_dir,
        verify=args.verify,
        reverify=args.reverify,
        repair=args.repair,
        strict=args.strict,
        variant=args.variant,
        max_size=args.max_size,
        index=args.index,
        check_jobs=args.check_jobs,
        pythons=tuple(args.pythons),
    )
    print(run_release(request))
    return 0
