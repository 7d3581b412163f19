"""`--worktree COMPONENT=DIR` builds a component from a local git working tree, keyed by its
HEAD and its uncommitted changes; the wheel's local version says so; release refuses it unless
asked; `--worktree infinicore=DIR` reports every submodule that is not as its gitlink says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.pipeline.release import sbom_of
from builder.sources.worktree import source_of, submodule_trees
from tests.gitrepos import PUBLIC, add_submodule, cmake_library, commit, git, init_repo


def repo_of(directory: Path) -> str:
    """``directory``'s files committed as a git repository on main."""
    git(directory, "init", "-q", "-b", "main")
    return commit(directory, {}, "the files as they are")


@pytest.mark.integration
def test_identity_follows_uncommitted_changes_and_untracked_files(tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    head = init_repo(tree, cmake_library("lib"))
    clean = source_of(tree)
    assert (clean.head, clean.diff, clean.dirty) == (head, "", False)
    (tree / "lib.c").write_text("int answer(void) { return 43; }\n")
    edited = source_of(tree)
    assert edited.dirty and edited.head == head
    (tree / "new.c").write_text("int more(void) { return 1; }\n")
    assert source_of(tree).diff not in ("", edited.diff)


@pytest.mark.integration
def test_worktree_with_an_uncommitted_change_builds_a_dirty_wheel_and_release_refuses_it(
    tmp_path: Path,
    home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    ops = mini.parent / "ops"
    head = repo_of(ops)
    source = next(
        p for p in sorted(ops.rglob("*.c*")) if p.is_file() and p.suffix in (".c", ".cc", ".cpp")
    )
    source.write_text(source.read_text() + "\n// a local change\n")
    out = tmp_path / "dist"
    args = ("--manifest", mini, "--vendor", "cpu", "--worktree", f"miniops={ops}")
    pinned = cli("plan", *args[:4], "--json")
    plan = cli("plan", *args, "--json")
    assert plan.code == 0, plan.err
    keys = {c["name"]: c["key"] for c in json.loads(plan.out)["components"]}
    before = {c["name"]: c["key"] for c in json.loads(pinned.out)["components"]}
    assert [n for n in keys if keys[n] != before[n]] == ["miniops", "minilm"]  # it, dependants
    ops_plan = next(c for c in json.loads(plan.out)["components"] if c["name"] == "miniops")
    assert ops_plan["source_id"].startswith(f"worktree:{head}+")
    text = cli("plan", *args).out
    assert f"#  source: working tree {ops} (HEAD {head[:12]}, changes sha256 " in text
    result = cli("wheel", *args, "--out", out)
    assert result.code == 0, result.err
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith("infini_mini-0.1.0+cpu.dirty-"), wheel.name
    shown = cli("inspect", wheel)
    assert shown.code == 0, shown.err
    manifest = json.loads(shown.out)
    assert (manifest["vendor"], manifest["wheel"], manifest["worktrees"]) == (
        "cpu",
        wheel.name,
        ["miniops"],
    )
    ops_source = manifest["components"]["miniops"]["source"]
    assert (ops_source["kind"], ops_source["head"]) == ("worktree", head)
    assert ops_source["diff"] == ops_plan["source_id"].split("+")[1]
    assert manifest["components"]["minirt"]["source"]["kind"] == "path"
    assert manifest["operators"] == {"miniops": {"MINI_OPS_OPS": "add,mul,gemm"}}
    assert str(tmp_path) not in shown.out  # no path of this machine
    # The run report and the SBOM say which component came from a working tree, and which.
    run = {c["name"]: c for c in json.loads(cli("report", "--json").out)["components"]}
    assert run["miniops"]["worktree"] == {
        "path": str(ops),
        "head": head,
        "diff": ops_source["diff"],
    }
    assert run["minirt"]["worktree"] == {}
    bom = json.loads(sbom_of(wheel))
    props = {
        p["name"].rsplit(":", 1)[1]: p["value"]
        for c in bom["components"]
        if c["name"] == "miniops"
        for p in c["properties"]
    }
    assert (props["source"], props["head"], props["diff"]) == ("worktree", head, ops_source["diff"])
    refused = cli("release", *args, "--output", tmp_path / "release")
    assert refused.code == 2
    assert "a release is built from the pins" in refused.err
    assert not (tmp_path / "release").exists()


def superproject(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A checkout of an InfiniCore-like superproject with submodules rt, ops and ccl at their
    repositories' first commits (which are returned)."""
    mirrors = tmp_path / "mirrors"
    shas = {n: init_repo(mirrors / f"{n}.git", cmake_library(n)) for n in ("rt", "ops", "ccl")}
    core = tmp_path / "core"
    init_repo(core, {"README": "core\n"})
    for name, sha in shas.items():
        add_submodule(core, f"{PUBLIC}/{name}.git", f"submodules/{name}", sha, mirrors)
    commit(core, {}, "submodules")
    return core, shas


@pytest.mark.integration
def test_infinicore_worktree_reports_every_submodule_problem_in_one_message(
    tmp_path: Path,
) -> None:
    from builder.core.errors import SourceError

    core, _shas = superproject(tmp_path)
    assert [p.name for _u, _g, p in submodule_trees(core)] == ["ccl", "ops", "rt"]
    commit(core / "submodules" / "ops", {"ops.c": "int answer(void) { return 7; }\n"}, "moved")
    (core / "submodules" / "ccl" / "ccl.c").write_text("int answer(void) { return 8; }\n")
    git(core, "submodule", "deinit", "-q", "-f", "submodules/rt")
    with pytest.raises(SourceError) as caught:
        submodule_trees(core)
    message = caught.value.message
    assert "submodules/rt: not initialised" in message
    assert "submodules/ops: HEAD" in message and "is not the gitlink" in message
    assert "submodules/ccl: uncommitted changes" in message


@pytest.mark.integration
def test_infinicore_worktree_gives_each_submodule_to_the_component_of_its_repository(
    tmp_path: Path,
) -> None:
    from builder.manifest.loader import load_stack
    from builder.manifest.model import WorktreeSource
    from builder.sources.worktree import apply
    from tests.gitrepos import public_stack

    core, shas = superproject(tmp_path)
    stack = load_stack(public_stack(tmp_path / "s", {"rt": shas["rt"], "ops": shas["ops"]}))
    local = apply(stack, "cpu", (f"infinicore={core}",))
    sources = {n: c.source_for("cpu") for n, c in local.components.items()}
    assert sources == {
        n: WorktreeSource(path=core / "submodules" / n, head=shas[n], diff="")
        for n in ("rt", "ops")
    }
    assert stack.components["rt"].source_for("cpu").rev == shas["rt"]  # the stack is unchanged
