"""Planning for several interpreters at once (pure): one plan per interpreter, and the one plan
that builds them all.

A component's key hashes the interpreter only where its recipe uses Python (``python: true``),
so the plans of two interpreters share every other entry. The union builds each key once: a
component with the same key in every plan keeps its name, and one whose key differs is planned
per interpreter, named ``NAME@TAG`` (``minilm@cp312``), its dependencies renamed alike. The
executor then builds the per-interpreter ones side by side where the cores allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from builder.plan import ComponentPlan, Plan

SEPARATOR = "@"


def lane_name(name: str, tag: str) -> str:
    """``minilm`` built for ``cp312``: ``minilm@cp312``."""
    return f"{name}{SEPARATOR}{tag}"


def split_lane(name: str) -> tuple[str, str | None]:
    """``minilm@cp312`` -> (``minilm``, ``cp312``); a shared component has no tag."""
    base, _, tag = name.partition(SEPARATOR)
    return base, tag or None


def shared_names(plans: Mapping[str, Plan]) -> frozenset[str]:
    """The components whose key is the same in every plan: built once for all interpreters."""
    first, *others = plans.values()
    return frozenset(
        c.name for c in first.components if all(p.get(c.name).key == c.key for p in others)
    )


def union_plan(plans: Mapping[str, Plan]) -> Plan:
    """One plan building every interpreter's stack (``plans``: tag -> plan, the first the
    primary): the shared components once, the others once per tag, in dependency order."""
    shared = shared_names(plans)
    first = next(iter(plans.values()))
    components: list[ComponentPlan] = []
    for component in first.components:
        if component.name in shared:
            components.append(component)
            continue
        for tag, plan in plans.items():
            components.append(_renamed(plan.get(component.name), tag, shared))
    return replace(first, components=tuple(components))


def _renamed(component: ComponentPlan, tag: str, shared: frozenset[str]) -> ComponentPlan:
    depends = tuple(d if d in shared else lane_name(d, tag) for d in component.depends)
    return replace(component, name=lane_name(component.name, tag), depends=depends)
