"""``infini-stack audit``: what every ELF in a wheel needs; nothing leaked, nothing missing."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from builder import __version__
from builder.core.errors import EXIT_AUDIT, EXIT_INTERNAL, UsageError
from builder.core.termwrap import terminal_width
from builder.noop import default_home
from wheels.audit import audit_wheel, default_cache_dir, infer_vendor
from wheels.audit_report import WheelAudit, render_text, to_json
from wheels.policy import canonical_vendor, load_vendor_policy
from wheels.sizes import parse_size


def size_argument(text: str) -> int:
    """``--max-size``'s value in bytes; argparse makes a bad one a usage error (exit 2)."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wheels", nargs="+", metavar="WHEEL", help="wheel files")
    parser.add_argument(
        "--vendor",
        "-V",
        help="vendor policy for every wheel: cpu, nvidia, moore or thead (alias ali); default: "
        "from each wheel's local version (+cpu, +cu130, +musa..., +ppu...), else cpu",
    )
    parser.add_argument(
        "--cuda-arch",
        action="append",
        default=[],
        metavar="ARCH",
        help="a CUDA architecture the NVIDIA wheel's device code must run on (90, 100f, 90a); "
        "repeatable; added to those of --manifest",
    )
    parser.add_argument(
        "--manifest",
        "-m",
        type=Path,
        help="take the CUDA architectures from this stack.yaml (vendors.nvidia.cuda_architectures)",
    )
    parser.add_argument(
        "--max-size",
        type=size_argument,
        metavar="SIZE",
        help="a wheel larger than SIZE (100MB, 95MiB, bytes) fails the audit; default: "
        "--manifest's wheel.max_size, else a warning above PyPI's 100 MB upload limit",
    )
    parser.add_argument("--json", action="store_true", help="print the full graph as JSON")
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the audit as one self-contained HTML page: each ELF, what it needs "
        "and where each need resolves, findings marked, CUDA architectures per ELF",
    )
    parser.add_argument(
        "--symbols",
        action="store_true",
        help="with --json: list every ELF's defined and undefined symbols",
    )
    # How the audit reads: its processes and its cache.
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        help="processes for reading big wheels (default: the number of cores)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the audit cache"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="audit cache (default: $INFINI_STACK_HOME/audit-cache or "
        "$XDG_CACHE_HOME/infini-stack/audit-cache)",
    )


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _check_paths(args.wheels)
    fixed = load_vendor_policy(_vendor(args.vendor)) if args.vendor else None
    architectures = cuda_architectures(args.manifest, args.cuda_arch)
    max_size = args.max_size if args.max_size is not None else manifest_max_size(args.manifest)
    cache_dir = None
    if not args.no_cache:
        cache_dir = args.cache_dir or default_cache_dir(Path(default_home(os.environ)))
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
    from builder.manifest.loader import load_stack  # (yaml: only with --manifest)

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
    from wheels.audit_html import audit_page

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
    found = canonical_vendor(name)
    if found is not None:
        return found
    from builder.vendors import canonical_name  # the registry's suggestion for a typo

    return canonical_name(name)
