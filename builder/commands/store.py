"""``infini-stack store verify``: every store entry (or those of one vendor's plan) against its
install manifest; ``--repair`` builds (or pulls) again what changed (see
:mod:`builder.pipeline.store_verify`)."""

from __future__ import annotations

import argparse

from builder.commands.common import (
    add_cache_options,
    add_home,
    add_json,
    add_manifest,
    cache_request,
    print_json,
)


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)
    verify = sub.add_parser(
        "verify",
        help="check each entry's files against its install manifest",
        description="Hash every file of each store entry (or of those --vendor's plan uses) and "
        "compare it with the entry's install manifest: what is missing, extra or changed, file "
        "by file. Entries made before install manifests existed are unverifiable, not broken. "
        "Exit 5 when an entry is changed and not repaired.",
    )
    add_manifest(verify)
    verify.add_argument(
        "--vendor",
        "-V",
        default="",
        help="only the entries of this vendor's plan (and repair through it)",
    )
    add_home(verify)
    verify.add_argument(
        "--repair",
        action="store_true",
        help="remove each changed entry and build it again (or pull it again from a cache)",
    )
    add_json(verify)
    add_cache_options(verify)


def run(args: argparse.Namespace) -> int:
    from builder.core.errors import EXIT_BUILD
    from builder.pipeline.requests import StackRequest
    from builder.pipeline.store_verify import VerifyRequest, run_verify

    request = VerifyRequest(
        stack=StackRequest(
            vendor=args.vendor, manifest=args.manifest, home=args.home, store=args.store
        ),
        repair=args.repair,
        cache=cache_request(args),
    )
    outcome = run_verify(request)
    if args.json:
        print_json(outcome.to_json())
    else:
        for checked in outcome.entries:
            lines = checked.verdict.lines()
            print("\n".join(lines))
            if checked.repair:
                print(f"  repaired: {checked.repair}")
        print(
            f"{len(outcome.entries)} entr{'y' if len(outcome.entries) == 1 else 'ies'}: "
            f"{outcome.count('ok')} ok, {outcome.count('changed')} changed, "
            f"{outcome.count('unverifiable')} unverifiable; {outcome.broken} broken"
        )
    return EXIT_BUILD if outcome.broken else 0
