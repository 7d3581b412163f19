"""``infini-stack audit``: what every ELF in a wheel needs; nothing leaked, nothing missing."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from builder.core.errors import EXIT_AUDIT, EXIT_INTERNAL, UsageError
from builder.core.quickargs import Namespace, Option, parse

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from pathlib import Path

    from wheels.audit_report import WheelAudit


def path_argument(text: str) -> Path:
    """A path option's value (pathlib imported when a path is given)."""
    from pathlib import Path

    return Path(text)


def size_argument(text: str) -> int:
    """``--max-size``'s value in bytes; argparse makes a bad one a usage error (exit 2)."""
    from wheels.sizes import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


OPTIONS = (
    Option(
        ("--vendor", "-V"),
        "value",
        "vendor policy for every wheel: cpu, nvidia, moore or thead (alias ali); default: "
        "from each wheel's local version (+cpu, +cu130, +musa..., +ppu...), else cpu",
    ),
    Option(
        ("--cuda-arch",),
        "append",
        "a CUDA architecture the NVIDIA wheel's device code must run on (90, 100f, 90a); "
        "repeatable; added to those of --manifest",
        metavar="ARCH",
    ),
    Option(
        ("--manifest", "-m"),
        "value",
        "take the CUDA architectures from this stack.yaml (vendors.nvidia.cuda_architectures)",
        convert=path_argument,
    ),
    Option(
        ("--max-size",),
        "value",
        "a wheel larger than SIZE (100MB, 95MiB, bytes) fails the audit; default: "
        "--manifest's wheel.max_size, else a warning above PyPI's 100 MB upload limit",
        convert=size_argument,
        metavar="SIZE",
    ),
    Option(("--json",), "flag", "print the full graph as JSON"),
    Option(
        ("--html",),
        "value",
        "also write the audit as one self-contained HTML page: each ELF, what it needs "
        "and where each need resolves, findings marked, CUDA architectures per ELF",
        convert=path_argument,
        metavar="FILE",
    ),
    Option(("--symbols",), "flag", "with --json: list every ELF's defined and undefined symbols"),
    # How the audit reads: its processes and its cache.
    Option(
        ("--jobs", "-j"),
        "value",
        "processes for reading big wheels (default: the number of cores)",
        convert=int,
    ),
    Option(("--no-cache",), "flag", "do not read or write the audit cache"),
    Option(
        ("--cache-dir",),
        "value",
        "audit cache (default: $INFINI_STACK_HOME/audit-cache or "
        "$XDG_CACHE_HOME/infini-stack/audit-cache)",
        convert=path_argument,
    ),
)
WHEELS = ("wheels", str)  # (as given: each is opened by its name, without pathlib)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheels", nargs="+", type=WHEELS[1], metavar="WHEEL", help="wheel files")
    for option in OPTIONS:
        option.add_to(parser)


def parse_fast(words: Sequence[str]) -> Namespace | None:
    """``audit WORDS...`` read without argparse (:mod:`builder.core.quickargs`); None: let
    argparse read it."""
    return parse(words, OPTIONS, WHEELS, {"command": "audit", "handler": run})


def run(args: argparse.Namespace) -> int:
    # Imported here, and only what this run needs: a small wheel's audit takes less time than
    # most of the tool's modules take to import (the vendor registry alone, for one name).
    from builder import noop
    from builder.core.termwrap import terminal_width
    from wheels.audit import audit_wheel, default_cache_dir, infer_vendor
    from wheels.audit_report import render_text, to_json
    from wheels.policy import load_vendor_policy

    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _check_paths(args.wheels)
    fixed = load_vendor_policy(_vendor(args.vendor)) if args.vendor else None
    architectures = cuda_architectures(args.manifest, args.cuda_arch)
    max_size = args.max_size if args.max_size is not None else manifest_max_size(args.manifest)
    cache_dir = None
    if not args.no_cache:
        cache_dir = args.cache_dir or default_cache_dir(
            path_argument(noop.default_home(os.environ))
        )
    audits = [
        audit_wheel(
            path,
            fixed or load_vendor_policy(infer_vendor(path)),
            cache_dir=cache_dir,
            workers=args.jobs,
            cuda_architectures=architectures,
            max_size=max_size,
        )
        for path in args.wheels
    ]
    if args.html:
        _write_html(args.html, audits)
    if args.json:
        import json

        print(json.dumps(to_json(audits, symbols=args.symbols), indent=2))
    else:
        print(render_text(audits, terminal_width(sys.stdout)))
    broken = [a for a in audits if a.errors]
    if broken:
        names = ", ".join(a.name for a in broken)
        print(f"error: internal error while auditing {names} (no verdict)", file=sys.stderr)
        return EXIT_INTERNAL
    failed = [a for a in audits if not a.ok]
    if failed:
        if not args.json:
            print(
                f"error: {len(failed)} of {len(audits)} wheel(s) failed the audit", file=sys.stderr
            )
        return EXIT_AUDIT
    return 0


def manifest_max_size(manifest: Path | None) -> int | None:
    """stack.yaml's ``wheel.max_size``, where a manifest is given."""
    if manifest is None:
        return None
    from builder.manifest.loader import load_stack

    spec = load_stack(manifest).wheel
    return spec.max_size if spec is not None else None


def _check_paths(paths: list[str]) -> None:
    """A path that is not a file is a usage error (exit 2), never an audit verdict."""
    for path in paths:
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file", hint="give the path of a .whl file")
        if not os.path.isfile(path):
            raise UsageError(f"{path}: not a file", hint="give the path of a .whl file")


def _write_html(target: Path, audits: list[WheelAudit]) -> None:
    from builder import __version__
    from wheels.audit_html import audit_page
    from wheels.audit_report import to_json

    text = audit_page(to_json(audits)["wheels"], f"infini-stack {__version__}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"audit page: {target}", file=sys.stderr)


def cuda_architectures(manifest: Path | None, given: list[str]) -> tuple[str, ...]:
    """The architectures of ``manifest``'s nvidia vendor, then ``given``, each once; a string
    that is not a CUDA architecture is a usage error."""
    found: list[str] = []
    if manifest is not None:
        from builder.manifest.loader import load_stack

        vendor = load_stack(manifest).vendors.get("nvidia")
        if vendor is None:
            raise UsageError(f"{manifest} has no nvidia vendor to take CUDA architectures from")
        found += vendor.settings.cuda_architectures
    if given:
        from wheels.cuda.arch import CudaArchError, parse_arch
    for text in given:
        try:
            parse_arch(text)
        except CudaArchError as exc:
            raise UsageError(f"--cuda-arch: {exc}", hint="e.g. --cuda-arch 90") from None
        found.append(text)
    return tuple(dict.fromkeys(found))


def _vendor(name: str) -> str:
    """The canonical vendor name; an unknown one is a usage error with a suggestion."""
    from wheels.policy import canonical_vendor

    found = canonical_vendor(name)
    if found is not None:
        return found
    from builder.vendors import canonical_name  # the registry's suggestion for a typo

    return canonical_name(name)
