"""`lock --from infinicore=REF` pins what an InfiniCore-like superproject's gitlinks name and
records the contract; `lock --check` reports drift: the contract, commits behind the branch, and
whether a pull request pin has merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.pipeline import sbom
from builder.pipeline.context import open_context, plan_for
from builder.pipeline.requests import PlanRequest, StackRequest
from tests.gitrepos import PUBLIC, add_submodule, cmake_library, commit, git, init_repo, mirror

NAMES = ("infinirt", "infiniops", "infiniccl")


@pytest.fixture
def upstream(tmp_path: Path) -> dict[str, str]:
    """Three component repositories and a superproject (core.git) pinning each as a submodule;
    infiniops gets two commits after its gitlink and an unmerged pull request ref."""
    root = tmp_path / "mirrors"
    shas = {name: init_repo(root / f"{name}.git", cmake_library(name)) for name in NAMES}
    core = root / "core.git"
    init_repo(core, {"README": "core\n"})
    for name in NAMES:
        add_submodule(core, f"{PUBLIC}/{name}.git", f"submodules/{name}", shas[name], root)
    shas["core"] = commit(core, {"README": "core with submodules\n"}, "pin the submodules")
    ops = root / "infiniops.git"
    shas["ops2"] = commit(ops, {"infiniops.c": "int answer(void) { return 2; }\n"}, "two")
    shas["ops3"] = commit(ops, {"infiniops.c": "int answer(void) { return 3; }\n"}, "three")
    git(ops, "checkout", "-q", "-b", "feature", shas["ops2"])
    shas["pr"] = commit(ops, {"extra.c": "int extra(void) { return 1; }\n"}, "a pull request")
    git(ops, "update-ref", "refs/pull/7/head", shas["pr"])
    git(ops, "checkout", "-q", "main")
    git(ops, "branch", "-q", "-D", "feature")
    return shas


def manifest(root: Path, pins: dict[str, str], overrides: str = "") -> Path:
    (root / "components").mkdir(parents=True, exist_ok=True)
    lines = ["# the stack", "vendors:", "  cpu: {}", "  nvidia: {}", "", "components:"]
    for name in NAMES:
        lines += [f"  {name}:", f"    git: {PUBLIC}/{name}.git", f"    rev: {pins[name]}"]
        lines += [overrides] if name == "infiniops" and overrides else []
        (root / "components" / f"{name}.yaml").write_text("vendors:\n  cpu: {}\n  nvidia: {}\n")
    path = root / "stack.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def lock(cli, stack: Path, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return cli(
        "lock",
        *args,
        "--manifest",
        stack,
        "--mirror",
        mirror(tmp_path / "mirrors"),
        "--from-git",
        f"{PUBLIC}/core.git",
    )


@pytest.mark.integration
def test_lock_from_pins_the_gitlinks_and_records_the_contract_keeping_comments(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    old = {"infinirt": upstream["infinirt"], "infiniops": upstream["ops3"], "infiniccl": "a" * 40}
    stack = manifest(tmp_path / "s", old)
    result = lock(cli, stack, tmp_path, "--from", "infinicore=main")
    assert result.code == 0, result.err
    text = stack.read_text()
    assert text.startswith("# the stack\n")
    assert f"    rev: {upstream['infiniops']}\n" in text
    assert f"    rev: {upstream['infiniccl']}\n" in text
    assert f"  infinicore:\n    git: {PUBLIC}/core.git\n    rev: {upstream['core']}\n" in text
    assert f"      infiniops: {upstream['infiniops']}\n" in text
    assert cli("validate", "--manifest", stack).code == 0
    # Again at the same revision: the contract block is replaced, not added twice.
    assert lock(cli, stack, tmp_path, "--from", f"infinicore={upstream['core']}").code == 0
    assert stack.read_text() == text


@pytest.mark.integration
def test_an_override_departing_from_the_contract_needs_a_reason_which_plan_prints(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    override = f"    vendors:\n      nvidia:\n        rev: {upstream['ops3']}"
    stack = manifest(tmp_path / "s", {n: upstream[n] for n in NAMES}, override)
    result = lock(cli, stack, tmp_path, "--from", "infinicore=main")
    assert result.code == 0, result.err
    assert "note: infiniops for nvidia is pinned at" in result.err
    invalid = cli("validate", "--manifest", stack)
    assert invalid.code == 2
    assert "infiniops for nvidia is pinned at" in invalid.err
    assert "reason:" in invalid.err
    text = stack.read_text().replace(
        f"        rev: {upstream['ops3']}",
        f"        rev: {upstream['ops3']}\n        reason: needs three",
    )
    stack.write_text(text)
    assert cli("validate", "--manifest", stack).code == 0
    plan = cli("plan", "--manifest", stack, "--vendor", "nvidia")
    assert plan.code == 0, plan.err
    ops = plan.out.split("## infiniops")[1]
    assert "#  departs from the contract: needs three" in ops
    assert "departs from the contract" not in plan.out.split("## infiniops")[0]


@pytest.mark.integration
def test_check_reports_commits_behind_the_branch_and_an_unmerged_then_merged_pull_request(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    override = f"    vendors:\n      nvidia:\n        rev: {upstream['pr']}\n        reason: PR 7"
    stack = manifest(tmp_path / "s", {n: upstream[n] for n in NAMES}, override)
    assert lock(cli, stack, tmp_path, "--from", "infinicore=main").code == 0
    result = lock(cli, stack, tmp_path, "--check", "--json")
    rows = {(r["component"], tuple(r["vendors"])): r for r in json.loads(result.out)}
    ops = rows[("infiniops", ())]
    assert (ops["contract"], ops["behind"], ops["branch"]) == ("=", 2, "main")
    assert ops["newest"].endswith(" three")
    assert rows[("infinirt", ())]["behind"] == 0
    pull = rows[("infiniops", ("nvidia",))]
    assert (pull["contract"], pull["reason"]) == ("declared", "PR 7")
    assert (pull["pull"], pull["merged_as"], pull["ok"]) == ("refs/pull/7/head", None, False)
    assert result.code == 4  # the pull request's head is on no branch
    # The request is squashed into main: the check names the commit that merged it.
    ops_repo = tmp_path / "mirrors" / "infiniops.git"
    squash = commit(ops_repo, {"extra.c": "int extra(void) { return 1; }\n"}, "extra (#7)")
    table = lock(cli, stack, tmp_path, "--check")
    line = next(x for x in table.out.splitlines() if "infiniops (nvidia)" in x)
    assert f"refs/pull/7/head: merged as {squash[:12]}" in line
    assert "declared" in line


@pytest.mark.integration
def test_strict_check_fails_on_an_undeclared_departure_from_another_contract_revision(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = manifest(tmp_path / "s", {n: upstream[n] for n in NAMES})
    assert lock(cli, stack, tmp_path, "--from", "infinicore=main").code == 0
    assert lock(cli, stack, tmp_path, "--check", "--strict").code == 0
    # InfiniCore moves infiniops on; checked against that revision, the pin departs.
    core = tmp_path / "mirrors" / "core.git"
    insteadof = f"url.{tmp_path / 'mirrors'}/.insteadOf={PUBLIC}/"
    git(core / "submodules" / "infiniops", "-c", insteadof, "fetch", "-q", "origin")
    git(core / "submodules" / "infiniops", "checkout", "-q", upstream["ops3"])
    commit(core, {}, "move infiniops")
    plain = lock(cli, stack, tmp_path, "--check", "--from", "infinicore=main")
    assert plain.code == 0, plain.err
    assert "UNDECLARED" in plain.out
    strict = lock(cli, stack, tmp_path, "--check", "--strict", "--from", "infinicore=main")
    assert strict.code == 2
    assert "1 undeclared departures from the contract: infiniops" in strict.err


@pytest.mark.integration
def test_the_contract_is_fetched_never_built_and_named_in_the_sbom(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = manifest(tmp_path / "s", {n: upstream[n] for n in NAMES})
    assert lock(cli, stack, tmp_path, "--from", "infinicore=main").code == 0
    args = ("--manifest", stack, "--vendor", "cpu", "--mirror", mirror(tmp_path / "mirrors"))
    fetched = cli("fetch", *args)
    assert fetched.code == 0, fetched.err
    assert f"infinicore   {upstream['core']}  (the contract: fetched, not built)" in fetched.out
    built = cli("build", *args)
    assert built.code == 0, built.err
    run = json.loads(cli("report", "--json").out)
    assert sorted(c["name"] for c in run["components"]) == sorted(NAMES)
    request = StackRequest(vendor="cpu", manifest=stack, mirrors=(mirror(tmp_path / "mirrors"),))
    plan = plan_for(open_context(request), PlanRequest())
    text = sbom.render(
        sbom.SbomInputs(plan=plan, wheel=None, files={}, owners={}, requires=[], epoch=0)
    )
    assert sbom.validate(text) == []
    bom = json.loads(text)
    (core,) = [c for c in bom["components"] if c["name"] == "infinicore"]
    assert core["version"] == upstream["core"]
    props = {p["name"].rsplit(":", 1)[1]: p["value"] for p in core["properties"]}
    assert (props["role"], props["built"]) == ("contract", "false")
