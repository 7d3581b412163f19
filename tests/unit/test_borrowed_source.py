"""``source: NAME``: a component built from another's checkout (InfiniLM's runtime beside its
extension modules), taking its pin per vendor, pinning nothing itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.core.errors import UsageError
from builder.manifest.loader import load_stack
from builder.manifest.model import GitSource, WorktreeSource
from builder.sources import worktree
from builder.sources.lock import pins, source_for
from tests.unit.test_manifest import RECIPE_CPU, SHA, problems, write_stack

OTHER = "b" * 40
RECIPES = {"lm": "vendors:\n  cpu: {}\n  thead: {}\n", "lmrt": "vendors:\n  cpu: {}\n  thead: {}\n"}


def stack_text(runtime: str) -> str:
    return (
        "vendors:\n  cpu: {}\n  thead: {}\ncomponents:\n"
        f"  lmrt:\n{runtime}"
        f"  lm:\n    git: https://x/lm.git\n    rev: {SHA}\n    vendors:\n"
        f"      thead:\n        rev: {OTHER}\n        reason: thead needs a later one\n"
    )


def test_a_borrower_takes_the_lenders_pin_for_every_vendor_and_keeps_its_options(
    tmp_path: Path,
) -> None:
    runtime = "    source: lm\n    vendors:\n      thead: {options: {PART: runtime}}\n"
    stack = load_stack(write_stack(tmp_path, stack_text(runtime), RECIPES))
    rt, lm = stack.components["lmrt"], stack.components["lm"]
    assert rt.borrows == "lm" and lm.borrows is None
    for vendor in ("cpu", "thead"):
        assert rt.source_for(vendor) == lm.source_for(vendor)
    assert rt.source_for("thead") == GitSource(url="https://x/lm.git", rev=OTHER)
    assert rt.reason_for("thead") == "thead needs a later one"
    assert rt.options_for("thead") == {"PART": "runtime"}
    assert list(stack.components) == ["lmrt", "lm"]  # as written, though read after its lender
    # lock moves the lender's pin, which the borrower follows; it has none of its own.
    assert [name for name, _vendors, _source in pins(stack)] == ["lm", "lm"]
    with pytest.raises(UsageError, match="lmrt builds lm's checkout: lock lm"):
        source_for(stack, "lmrt", None)


def test_a_borrower_pins_nothing_and_names_a_component_with_a_pin(tmp_path: Path) -> None:
    runtime = f"    source: lm\n    rev: {SHA}\n    vendors:\n      thead: {{rev: {OTHER}}}\n"
    found = "\n".join(problems(write_stack(tmp_path, stack_text(runtime), RECIPES)))
    assert "'rev' is not for a component with 'source: lm'" in found
    assert found.count("so pin lm instead") == 2
    unknown = "\n".join(problems(write_stack(tmp_path, stack_text("    source: ln\n"), RECIPES)))
    assert "unknown component 'ln'; expected one of: lm" in unknown
    chained = stack_text("    source: lm\n") + "  third:\n    source: lmrt\n"
    recipes = {**RECIPES, "third": RECIPE_CPU}
    assert "lmrt takes its source from lm" in "\n".join(
        problems(write_stack(tmp_path, chained, recipes))
    )


def test_a_working_tree_of_the_lender_is_what_both_build(tmp_path: Path) -> None:
    tree = tmp_path / "lm-tree"
    tree.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tree, check=True
        )
    stack = load_stack(write_stack(tmp_path, stack_text("    source: lm\n"), RECIPES))
    applied = worktree.apply(stack, "cpu", (f"lm={tree}",))
    for name in ("lm", "lmrt"):
        source = applied.components[name].source_for("cpu")
        assert isinstance(source, WorktreeSource) and source.path == tree
    with pytest.raises(UsageError, match=f"give --worktree lm={tree}"):
        worktree.apply(stack, "cpu", (f"lmrt={tree}",))
