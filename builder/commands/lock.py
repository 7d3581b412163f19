"""``infini-stack lock``: pin a component to what a branch or tag points at now; check pins."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from builder.commands.common import (
    add_home,
    add_json,
    add_manifest,
    add_mirror,
    layout_from,
    print_json,
)
from builder.core.errors import SourceError, UsageError
from builder.core.layout import Layout
from builder.manifest.loader import default_manifest, load_stack, resolve_vendor
from builder.manifest.model import GitSource, Stack
from builder.sources import fetch as sources
from builder.sources import lock


def configure(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)
    add_home(parser)
    add_mirror(parser)
    add_json(parser)
    parser.add_argument(
        "pins",
        nargs="*",
        metavar="COMPONENT=REF",
        help="a component and the branch, tag or SHA to pin it to",
    )
    parser.add_argument(
        "--vendor", "-V", default=None, help="pin only this vendor's revision (a vendor override)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="report pins that are no longer reachable from a branch or tag",
    )


def run(args: argparse.Namespace) -> int:
    manifest: Path = args.manifest or default_manifest()
    stack = load_stack(manifest)
    mirrors = dict(stack.mirrors)
    mirrors.update(sources.parse_mirrors(args.mirror or []))
    layout = layout_from(args)
    if args.check:
        if args.pins:
            raise UsageError("give either COMPONENT=REF pins or --check, not both")
        return check(stack, layout, mirrors, as_json=args.json)
    if not args.pins:
        raise UsageError("nothing to lock", hint="infini-stack lock COMPONENT=REF [--vendor V]")
    vendor = resolve_vendor(stack, args.vendor) if args.vendor else None
    for spec in args.pins:
        name, ref = lock.parse_request(spec)
        source = lock.source_for(stack, name, vendor)
        sha = lock.resolve_ref(source.url, ref, mirrors)
        # The commit must exist before it is written down (a SHA given as REF included).
        sources.Fetcher(layout, mirrors).ensure_commit(name, GitSource(url=source.url, rev=sha))
        changed = lock.write_pin(manifest, name, sha, vendor)
        where = f" for {vendor}" if vendor else ""
        state = "pinned" if changed else "already pinned"
        print(f"{name}{where}: {ref} -> {sha} ({state} in {manifest})")
        stack = load_stack(manifest)  # the next pin edits the file as it is now
    return 0


def check(stack: Stack, layout: Layout, mirrors: dict[str, str], *, as_json: bool) -> int:
    results = lock.check_pins(stack, layout, mirrors)
    if as_json:
        print_json(
            [
                {
                    "component": r.component,
                    "vendors": list(r.vendors),
                    "url": r.url,
                    "rev": r.rev,
                    "ok": r.ok,
                    "detail": r.detail,
                }
                for r in results
            ]
        )
    else:
        for r in results:
            where = f" ({', '.join(r.vendors)})" if r.vendors else ""
            mark = "ok " if r.ok else "BAD"
            print(f"{mark} {r.component}{where} {r.rev[:12]}  {r.detail}")
    bad = [r for r in results if not r.ok]
    if bad:
        names = ", ".join(
            f"{r.component}{' (' + ', '.join(r.vendors) + ')' if r.vendors else ''}" for r in bad
        )
        raise SourceError(
            f"{len(bad)} of {len(results)} pins are not reachable: {names}",
            hint="re-pin with `infini-stack lock COMPONENT=REF [--vendor V]`",
        )
    print(f"all {len(results)} pins reachable", file=sys.stderr)
    return 0
