"""Options shared by subcommands, and the typed requests made from them (once, here)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.core.layout import Layout
from builder.core.redact import redact_data
from builder.pipeline.context import layout_for
from builder.pipeline.requests import BuildRequest, CacheRequest, PlanRequest, StackRequest

LAUNCHER_ENV = "INFINI_STACK_LAUNCHER"


def add_manifest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest",
        "-m",
        type=Path,
        default=None,
        help="stack.yaml to use (default: $INFINI_STACK_MANIFEST, ./stack.yaml, "
        "else the bundled mini stack)",
    )


def add_vendor(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("--vendor", "-V", required=required, help=VENDOR_HELP)


# Written out (the aliases come from wheels/policy/vendors.json, which the parser does not read);
# tests/unit/test_cli_options.py holds it to the registry.
VENDOR_HELP = "cpu, nvidia (alias cuda), moore (musa, mthreads) or thead (ali, ppu)"


def add_home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="state directory (default: $INFINI_STACK_HOME or $XDG_CACHE_HOME/infini-stack)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="store directory (default: $INFINI_STACK_STORE or HOME/store)",
    )


def add_mirror(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="URL=DIR",
        help="fetch URL (or any URL starting with it) from DIR instead; repeatable",
    )


def add_bundle(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bundle",
        type=Path,
        default=None,
        metavar="FILE",
        help="take every source from FILE (made by `infini-stack bundle`), "
        "checking each SHA; the network is not used",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print data as JSON")


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    add_manifest(parser)
    add_vendor(parser)
    add_home(parser)
    parser.add_argument(
        "--component",
        "-c",
        action="append",
        default=[],
        metavar="NAME",
        help="only this component and what it depends on; repeatable",
    )
    parser.add_argument(
        "--test", action="store_true", help="build with the recipes' tests enabled and run them"
    )
    add_sanitize(parser)
    parser.add_argument(
        "--worktree",
        action="append",
        default=[],
        metavar="COMPONENT=DIR",
        help="build COMPONENT from the local git working tree DIR (uncommitted changes "
        "included) instead of its pin; infinicore=DIR takes every submodule; repeatable",
    )
    add_jobs(parser)


def add_sanitize(parser: argparse.ArgumentParser, *, wheel: bool = False) -> None:
    from builder.core.sanitize import SPEC_HELP

    default = (
        "the wheel's local version: +cpu.asan, +cpu.tsan"
        if wheel
        else "the vendor's sanitize: in stack.yaml"
    )
    doing = "run the wheel's code" if wheel else "build, test and run"
    parser.add_argument(
        "--sanitize",
        default=None,
        metavar="LIST",
        help=f"{doing} under sanitizers: {SPEC_HELP} (default: {default}); docs/sanitizers.md",
    )


def add_jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        "-j",
        type=positive_int,
        default=None,
        help="parallel compile jobs (default: the number of cores)",
    )


def add_check_jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check-jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="the runtime check's child processes at once (default: as many as the device's "
        "memory and the host's cores hold; 1: one after another)",
    )


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """What ``build``, ``wheel`` and ``release`` take: the plan, sources, launcher, progress."""
    add_plan_options(parser)
    add_mirror(parser)
    add_bundle(parser)
    parser.add_argument(
        "--launcher",
        default=os.environ.get(LAUNCHER_ENV, "auto"),
        help="compiler launcher for C, C++ and CUDA: auto (ccache, else sccache, when found), "
        f"none, or a program (default: ${LAUNCHER_ENV} or auto); not part of any cache key",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "plain", "live", "github", "quiet"),
        default="auto",
        help="progress output on stderr: auto (live lines on a terminal, fold groups under "
        "GitHub Actions, plain lines otherwise)",
    )
    add_cache_options(parser)


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """The remote cache of store entries (docs/remote-cache.md)."""
    group = parser.add_argument_group("remote cache")
    group.add_argument(
        "--cache",
        action="append",
        default=None,
        metavar="URL",
        help="look entries up in oci://HOST[:PORT]/REPOSITORY or file:///DIR before compiling; "
        "repeatable, tried in order (default: $INFINI_STACK_CACHE, else stack.yaml's cache:)",
    )
    group.add_argument(
        "--no-cache", action="store_true", help="use no remote cache, whatever the defaults say"
    )
    group.add_argument(
        "--push", action="store_true", help="upload each entry built here to the first cache"
    )
    group.add_argument(
        "--cache-required",
        action="store_true",
        help="fail when a cache cannot be reached (default: a warning, then a local build)",
    )
    group.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="KEYFILE|PUBKEY",
        help="accept entries signed by this ed25519 public key (besides stack.yaml's "
        "cache.trust); once a key is trusted, unsigned entries are refused",
    )
    group.add_argument(
        "--sign-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="sign pushed entries with this private key (default: "
        "$INFINI_STACK_CACHE_SIGNING_KEY, the PEM text, or $INFINI_STACK_CACHE_SIGNING_KEY_FILE)",
    )


def add_repair(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repair",
        action="store_true",
        help="retag the wheel manylinux with auditwheel repair, never grafting the vendor's "
        "external or distribution-supplied libraries, and audit it again",
    )


def add_variant(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variant",
        action="store_true",
        help="also write the PEP 825 variant wheel (label cu130, musa43, ppu12; null for cpu) "
        "and {name}-{version}-variants.json beside the wheel (stack.yaml: wheel.variant: true)",
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (refused at parse time, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def stack_request(args: argparse.Namespace) -> StackRequest:
    return StackRequest(
        vendor=args.vendor,
        manifest=args.manifest,
        home=getattr(args, "home", None),
        store=getattr(args, "store", None),
        mirrors=tuple(getattr(args, "mirror", ()) or ()),
        bundle=getattr(args, "bundle", None),
        worktrees=worktrees_of(args),
    )


def add_allow_worktree(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-worktree",
        action="store_true",
        help="release from --worktree trees anyway (a release is built from the pins)",
    )


def worktrees_of(args: argparse.Namespace) -> tuple[str, ...]:
    """--worktree's COMPONENT=DIR; refused where the command has --allow-worktree unset."""
    specs = tuple(getattr(args, "worktree", ()) or ())
    if specs and getattr(args, "allow_worktree", True) is False:
        raise UsageError(
            f"a release is built from the pins, not from working trees ({', '.join(specs)})",
            hint="drop --worktree, or pass --allow-worktree for a release that says so",
        )
    return specs


def plan_request(args: argparse.Namespace) -> PlanRequest:
    return PlanRequest(
        components=tuple(args.component or ()),
        tests=bool(getattr(args, "test", False)),
        suites=bool(getattr(args, "test", False)),
        jobs=getattr(args, "jobs", None),
        sanitize=sanitize_of(args),
    )


def sanitize_of(args: argparse.Namespace) -> str | None:
    """--sanitize, checked at once (ASan with TSan, an unknown name: exit 2)."""
    spec: str | None = getattr(args, "sanitize", None)
    if spec is not None:
        from builder.core.sanitize import parse

        parse(spec)
    return spec


def cache_request(args: argparse.Namespace) -> CacheRequest:
    urls = getattr(args, "cache", None)
    return CacheRequest(
        urls=() if getattr(args, "no_cache", False) else (tuple(urls) if urls else None),
        push=bool(getattr(args, "push", False)),
        required=bool(getattr(args, "cache_required", False)),
        trust=tuple(getattr(args, "trust", ()) or ()),
        sign_key=getattr(args, "sign_key", None),
    )


def build_request(args: argparse.Namespace) -> BuildRequest:
    return BuildRequest(
        stack=stack_request(args),
        plan=plan_request(args),
        cache=cache_request(args),
        launcher=args.launcher,
        progress=args.progress,
        keep_going=getattr(args, "keep_going", False),
        memo=getattr(args, "memo", True),
        argv=getattr(args, "argv", None),
    )


def layout_from(args: argparse.Namespace) -> Layout:
    return layout_for(getattr(args, "home", None), getattr(args, "store", None))


def print_json(data: Any) -> None:
    json.dump(redact_data(data), sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
