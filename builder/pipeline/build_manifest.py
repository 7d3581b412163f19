"""``stack-manifest.json``: what a wheel or a release was built from, in one file.

Upstream's builder writes a ``manifest.json`` of the InfiniLM, InfiniCore and submodule revisions,
the options and the operator slots; this records the same for a build of this tool: the contract,
each component's revision (or working-tree identity), its patches and resolved options, the
vendor, the CUDA architectures and the operator selection. No path of the building machine is
in it, so two builds from the same inputs write the same file. ``infini-stack inspect WHEEL``
prints it.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core.errors import StackError, UsageError
from builder.manifest.model import GitSource, WorktreeSource

if TYPE_CHECKING:
    from builder.plan import ComponentPlan, Plan

NAME = "stack-manifest.json"  # in the wheel's .dist-info, and beside a release's files
SCHEMA = 1


def is_operator_option(name: str) -> bool:
    """An option that selects operators (INFINI_OPS_OPS, INFINI_OPS_SELECTION, MINI_OPS_OPS)."""
    return name.endswith(("_OPS", "_SELECTION")) or name.startswith("INFINI_OPS_")


def source_of(c: ComponentPlan) -> dict[str, Any]:
    source = c.source
    if isinstance(source, WorktreeSource):
        return {"kind": "worktree", "head": source.head, "diff": source.diff or None}
    if isinstance(source, GitSource):
        return {"kind": "git", "url": source.url, "rev": source.rev}
    return {"kind": "path", "id": c.source_id}


def component_entry(plan: Plan, c: ComponentPlan) -> dict[str, Any]:
    options = plan.stack.components[c.name].options_for(plan.vendor)
    return {
        "source": source_of(c),
        "key": c.key,
        "patches": [{"name": p.name, "sha256": p.sha256} for p in c.patches],
        "options": dict(sorted(options.items())),
    }


def cuda_architectures(plan: Plan) -> list[str]:
    for c in plan.components:
        if value := c.defines.get("CMAKE_CUDA_ARCHITECTURES"):
            return value.split(";")
    return list(plan.stack.vendors[plan.vendor].settings.cuda_architectures)


def document(plan: Plan, *, wheel: str | None, tool: str) -> dict[str, Any]:
    contract = plan.stack.contract
    components = {c.name: component_entry(plan, c) for c in plan.components}
    operators = {
        name: {k: v for k, v in entry["options"].items() if is_operator_option(k)}
        for name, entry in components.items()
    }
    return {
        "schema": SCHEMA,
        "generator": tool,
        "wheel": wheel,
        "vendor": plan.vendor,
        "build_type": plan.stack.build_type,
        "contract": (
            {
                "name": contract.name,
                "git": contract.url,
                "rev": contract.rev,
                "pins": dict(contract.pins),
            }
            if contract
            else None
        ),
        "components": components,
        "worktrees": sorted(
            c.name for c in plan.components if isinstance(c.source, WorktreeSource)
        ),
        "cuda_architectures": cuda_architectures(plan),
        "operators": {name: ops for name, ops in operators.items() if ops},
    }


def render(plan: Plan, *, wheel: str | None, tool: str) -> bytes:
    return (json.dumps(document(plan, wheel=wheel, tool=tool), indent=2) + "\n").encode()


def read_from_wheel(wheel: Path) -> str:
    """The text of ``<name>.dist-info/stack-manifest.json`` in ``wheel``."""
    if not wheel.is_file():
        raise UsageError(f"{wheel}: no such file")
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                top, _, rest = member.partition("/")
                if top.endswith(".dist-info") and rest == NAME:
                    return archive.read(member).decode("utf-8")
    except zipfile.BadZipFile as exc:
        raise UsageError(f"{wheel}: not a wheel ({exc})") from exc
    raise StackError(f"{wheel.name} carries no {NAME} in its .dist-info (not built by this tool?)")
