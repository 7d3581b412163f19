"""``infini-stack cache keygen``: an ed25519 key pair for signing the remote cache's entries."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", required=True)
    keygen = sub.add_parser(
        "keygen",
        help="write a new private key (mode 0600) and print its public key",
        description="Write a new ed25519 private key to FILE (mode 0600, never over an existing "
        "file) and print its public key: put that line in stack.yaml's cache.trust (or pass it "
        "to --trust), and give the private key to the jobs that push (--sign-key FILE, or its "
        "contents in $INFINI_STACK_CACHE_SIGNING_KEY).",
    )
    keygen.add_argument(
        "--output", "-o", type=Path, required=True, metavar="FILE", help="the private key file"
    )


def run(args: argparse.Namespace) -> int:
    from builder.cache.signing import generate, key_id, parse_public

    public = generate(args.output)
    print(public)
    print(
        f"private key: {args.output} (key id {key_id(parse_public(public))}); "
        "trust the line above in stack.yaml's cache.trust or with --trust",
        file=sys.stderr,
    )
    return 0
