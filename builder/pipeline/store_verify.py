"""``store verify``: every entry (or those of one vendor's plan) against its install manifest;
``--repair`` removes what changed and builds it again, or pulls it again from a cache.

An entry is repaired through the plan that makes it: the plans (with and without tests) of its
vendor in the manifest given. An entry no plan of that manifest makes is removed and said to be
so (``gc`` would remove it anyway).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from builder.engine.store import Store, Verdict, entry_name
from builder.pipeline.build import build_plan
from builder.pipeline.context import Context, open_context, plan_for, require_preflight
from builder.pipeline.integrity import discard, verify_store
from builder.pipeline.requests import CacheRequest, PlanRequest, StackRequest


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    stack: StackRequest  # vendor "" : every entry of the store
    repair: bool = False
    cache: CacheRequest = dataclasses.field(default_factory=CacheRequest)


@dataclass(frozen=True, slots=True)
class Checked:
    """One entry's verdict, and (with ``--repair``) what became of it."""

    verdict: Verdict
    repair: str = ""  # rebuilt, pulled, or removed (no plan makes it); empty: not repaired

    @property
    def repaired(self) -> bool:
        return bool(self.repair)

    def to_json(self) -> dict[str, Any]:
        return {**self.verdict.to_json(), "repair": self.repair or None}


@dataclass(frozen=True, slots=True)
class Outcome:
    entries: tuple[Checked, ...]

    def count(self, state: str) -> int:
        return sum(1 for c in self.entries if c.verdict.state == state)

    @property
    def broken(self) -> int:
        """Entries still changed: not repaired, or repaired into another failure."""
        return sum(1 for c in self.entries if c.verdict.state == "changed" and not c.repaired)

    def to_json(self) -> dict[str, Any]:
        states = ("ok", "changed", "unverifiable")
        return {
            "entries": [c.to_json() for c in self.entries],
            "totals": {s: self.count(s) for s in states},
            "broken": self.broken,
        }


def run_verify(request: VerifyRequest) -> Outcome:
    ctx = open_context(request.stack) if request.stack.vendor else None
    if ctx is None:
        from builder.pipeline.context import layout_for

        layout = layout_for(request.stack.home, request.stack.store)
        verdicts = verify_store(layout)
    else:
        layout = ctx.layout
        verdicts = verify_store(layout, _plan_entries(ctx))
    changed = [v for v in verdicts if v.state == "changed"]
    repaired: dict[str, str] = {}
    if request.repair and changed:
        repaired = _repair(request, changed, ctx)
    return Outcome(tuple(Checked(v, repaired.get(v.name, "")) for v in verdicts))


def _plan_entries(ctx: Context) -> list[str]:
    store = Store(ctx.layout)
    names = {entry_name(c.key) for c in plan_for(ctx, PlanRequest()).components}
    return sorted(n for n in names if n in set(store.entries()))


def _repair(
    request: VerifyRequest, changed: Sequence[Verdict], ctx: Context | None
) -> dict[str, str]:
    """Remove each changed entry, then build (or pull) it again through its vendor's plan."""
    out: dict[str, str] = {}
    for vendor in sorted({v.vendor for v in changed}):
        mine = [v for v in changed if v.vendor == vendor]
        here = ctx or open_context(dataclasses.replace(request.stack, vendor=vendor))
        store = Store(here.layout)
        for v in mine:
            discard(store, v.name)
        plan = plan_for(here, PlanRequest())
        wanted = {entry_name(c.key) for c in plan.components} & {v.name for v in mine}
        if wanted:
            require_preflight(here)
            report = build_plan(here, plan, command="store-verify", cache=request.cache)
            for c in report.components:
                name = entry_name(c.key)
                if name in wanted and store.verify(name).state == "ok":
                    out[name] = "pulled" if c.status == "pulled" else "rebuilt"
        made = {entry_name(c.key) for c in plan.components}
        for v in mine:
            if v.name not in made:
                out[v.name] = "removed: no plan of the manifest makes it"
    return out
