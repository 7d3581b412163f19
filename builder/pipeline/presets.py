"""One component's build, written out to be run by hand (an IDE, a debugger)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.engine import presets
from builder.engine.store import Store
from builder.pipeline.build import launcher_for
from builder.pipeline.context import open_context, plan_for
from builder.pipeline.requests import PlanRequest, StackRequest


@dataclass(frozen=True)
class Written:
    hand: presets.HandBuild
    preset_file: Path
    script_file: Path
    vendor: str
    unbuilt: tuple[str, ...]  # dependencies not in the store yet


def write_presets(
    stack: StackRequest, selection: PlanRequest, out: Path | None, launcher: str
) -> Written:
    """CMakePresets.json and build.sh for the one component ``selection`` names."""
    ctx = open_context(stack)
    plan = plan_for(ctx, selection)
    component = plan.get(selection.components[0])
    target = (out or ctx.layout.presets(ctx.vendor, component.name)).resolve()
    hand = presets.HandBuild(
        component=component, out=target, jobs=plan.jobs, launcher=launcher_for(launcher)
    )
    preset_file, script_file = presets.write(hand)
    store = Store(ctx.layout)
    unbuilt = tuple(
        d.name for d in plan.components if d.name != component.name and not store.has(d.key)
    )
    return Written(hand, preset_file, script_file, ctx.vendor, unbuilt)
