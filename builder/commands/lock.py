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
from builder.core.fs import atomic_write
from builder.core.layout import Layout
from builder.manifest.contract import departures, undeclared_message
from builder.manifest.loader import default_manifest, load_stack, resolve_vendor
from builder.manifest.model import Contract, GitSource, Stack
from builder.sources import contract as superproject
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
        help="the drift report: per pin, whether it exists, keeps to the contract, how far "
        "behind its branch it is, and whether a pull request it came from has merged",
    )
    parser.add_argument(
        "--from",
        dest="contract",
        metavar="SUPERPROJECT=REF",
        default=None,
        help="pin the components a superproject's gitlinks name (infinicore=REF) and record it "
        "as the contract; with --check, check against that revision instead",
    )
    parser.add_argument(
        "--from-git",
        metavar="URL",
        default=None,
        help="the superproject's repository (default: the contract's, else InfiniCore's)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="with --check: fail when a pin departs from the contract without a reason",
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
        return check(stack, layout, mirrors, args)
    if args.contract:
        if args.pins or args.vendor:
            raise UsageError("--from pins the default revisions: give no COMPONENT=REF or --vendor")
        return lock_from(manifest, stack, layout, mirrors, args)
    if args.strict:
        raise UsageError("--strict goes with --check")
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


def contract_source(stack: Stack, spec: str, url: str | None, mirrors: dict[str, str]) -> GitSource:
    """The superproject revision ``spec`` (NAME=REF) names, resolved like any pin."""
    name, ref = lock.parse_request(spec)
    if url is None and stack.contract is not None and stack.contract.name == name:
        url = stack.contract.url
    if url is None and name == "infinicore":
        url = superproject.INFINICORE_URL
    if url is None:
        raise UsageError(f"where is '{name}'?", hint="give its repository with --from-git URL")
    return GitSource(url=url, rev=lock.resolve_ref(url, ref, mirrors))


def lock_from(
    manifest: Path, stack: Stack, layout: Layout, mirrors: dict[str, str], args: argparse.Namespace
) -> int:
    name = lock.parse_request(args.contract)[0]
    source = contract_source(stack, args.contract, args.from_git, mirrors)
    fetcher = sources.Fetcher(layout, mirrors)
    links = superproject.gitlinks(stack, fetcher, source, name)
    text = manifest.read_text(encoding="utf-8")
    pins: dict[str, str] = {}
    for link in links:
        sub = link.submodule
        if link.component is None:
            print(f"{name} {source.rev[:12]}: {sub.path} ({sub.url}) is no component here: left")
            continue
        fetcher.ensure_commit(link.component, GitSource(url=sub.url, rev=sub.rev))
        text = lock.set_pin(text, link.component, sub.rev)
        pins[link.component] = sub.rev
        print(f"{link.component}: {name} {source.rev[:12]} {sub.path} -> {sub.rev}")
    if not pins:
        raise SourceError(f"{name} at {source.rev} pins none of this manifest's components")
    text = lock.set_contract(text, superproject.contract_block(name, source.url, source.rev, pins))
    atomic_write(manifest, text)
    print(f"contract: {name} {source.rev} (recorded in {manifest})")
    contract = Contract(name=name, url=source.url, rev=source.rev, pins=pins)
    for departure in departures(contract, stack.components):
        if departure.vendor and not departure.reason:
            print(f"note: {undeclared_message(contract, departure)}", file=sys.stderr)
    return 0


def contract_pins(
    stack: Stack, layout: Layout, mirrors: dict[str, str], args: argparse.Namespace
) -> tuple[dict[str, str], list[str]]:
    """The gitlinks to check against (component -> SHA), and where the recorded contract no
    longer says what its superproject's tree does."""
    if args.contract:
        source = contract_source(stack, args.contract, args.from_git, mirrors)
        name = lock.parse_request(args.contract)[0]
    elif stack.contract is not None:
        source = GitSource(url=stack.contract.url, rev=stack.contract.rev)
        name = stack.contract.name
    else:
        return {}, []
    fetcher = sources.Fetcher(layout, mirrors)
    found = {
        link.component: link.submodule.rev
        for link in superproject.gitlinks(stack, fetcher, source, name)
        if link.component
    }
    stale: list[str] = []
    if stack.contract is not None and stack.contract.rev == source.rev:
        for component, sha in stack.contract.pins.items():
            if found.get(component) != sha:
                stale.append(
                    f"contract.{name}.pins.{component} is {sha[:12]}, but {name} "
                    f"{source.rev[:12]} pins {(found.get(component) or 'nothing')[:12]}"
                )
    print(f"contract: {name} {source.rev[:12]}", file=sys.stderr)
    return found, stale


def check(stack: Stack, layout: Layout, mirrors: dict[str, str], args: argparse.Namespace) -> int:
    contract, stale = contract_pins(stack, layout, mirrors, args)
    results = lock.check_pins(stack, layout, mirrors, contract)
    if args.json:
        print_json([row_json(r) for r in results])
    else:
        print(table(results))
    for line in stale:
        print(f"warning: {line}", file=sys.stderr)
    undeclared = [r for r in results if r.contract_state == "UNDECLARED"]
    if args.strict and (undeclared or stale):
        departing = [f"{r.component}{_where(r)} {r.rev[:12]}" for r in undeclared]
        raise UsageError(
            f"{len(undeclared) + len(stale)} undeclared departures from the contract: "
            + "; ".join([*departing, *stale]),
            hint="pin the contract's revision (`infini-stack lock --from ...`) or say why "
            "with `reason:` beside the rev",
        )
    bad = [r for r in results if not r.ok]
    if bad:
        names = ", ".join(f"{r.component}{_where(r)}" for r in bad)
        raise SourceError(
            f"{len(bad)} of {len(results)} pins are not reachable: {names}",
            hint="re-pin with `infini-stack lock COMPONENT=REF [--vendor V]`",
        )
    print(f"all {len(results)} pins reachable", file=sys.stderr)
    return 0


def _where(r: lock.PinCheck) -> str:
    return f" ({', '.join(r.vendors)})" if r.vendors else ""


def row_json(r: lock.PinCheck) -> dict[str, object]:
    return {
        "component": r.component,
        "vendors": list(r.vendors),
        "url": r.url,
        "rev": r.rev,
        "ok": r.ok,
        "detail": r.detail,
        "contract": r.contract_state,
        "contract_rev": r.contract_rev,
        "reason": r.reason,
        "branch": r.drift.branch,
        "behind": r.drift.behind,
        "newest": r.drift.newest,
        "pull": r.drift.pull,
        "merged_as": r.drift.merged_as,
    }


def table(results: list[lock.PinCheck]) -> str:
    """One line a pin: reachability, contract, distance from its branch's head, pull request."""
    rows = [("", "pin", "rev", "contract", "behind", "newest on branch", "reachable / pull")]
    for r in results:
        d = r.drift
        behind = f"{d.behind} ({d.branch})" if d.behind is not None else "-"
        pull = r.detail
        if d.pull:
            merged = f"merged as {d.merged_as[:12]}" if d.merged_as else "not merged"
            pull = f"{d.pull}: {merged}"
        rows.append(
            (
                "ok " if r.ok else "BAD",
                f"{r.component}{_where(r)}",
                r.rev[:12],
                r.contract_state,
                behind,
                d.newest or "-",
                pull,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )
