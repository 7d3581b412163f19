"""``gc`` across manifests: keep what every vendor's plan of each manifest uses, on this host."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.core.layout import Layout
from builder.engine import gc
from builder.engine.store import Store
from builder.pipeline.context import load_stack, preflighted_host


@dataclass(frozen=True)
class Outcome:
    removed: tuple[gc.Doomed, ...]
    in_use: tuple[gc.Doomed, ...]  # kept: a running build holds it
    kept_entries: int


def keep_for(manifests: Sequence[Path | None], layout: Layout) -> gc.Keep:
    """The keys ``build`` computes here for every vendor of each manifest, with and without
    tests (None: the manifest other commands use)."""
    from builder.plan import make_plan
    from builder.sources.fetch import gather

    keep = gc.Keep()
    for manifest in manifests:
        stack = load_stack(manifest)
        for vendor in stack.vendors:
            host, _ = preflighted_host(stack, vendor, layout)
            inputs = gather(stack, vendor)
            keep.add(make_plan(stack, vendor, host, inputs, layout, tests=True))
    return keep


def collect_garbage(manifests: Sequence[Path | None], layout: Layout, *, dry_run: bool) -> Outcome:
    keep = keep_for(manifests or [None], layout)
    doomed = gc.collect(layout, keep)
    removed = [d for d in doomed if dry_run or gc.remove(d)]
    in_use = [d for d in doomed if d not in removed]
    kept = len(set(Store(layout).entries()) & keep.entries)
    return Outcome(tuple(removed), tuple(in_use), kept)
