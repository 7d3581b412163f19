"""Several interpreters: finding them (the real ones on this machine), wheel.pythons in the
manifest, and the plan that builds the shared components once."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from builder.ci import matrix
from builder.core.errors import ManifestError, PreflightError, StackError, UsageError
from builder.manifest.loader import load_stack
from builder.plan_interpreters import shared_names, split_lane, union_plan
from builder.providers.common import pybind11_too_old
from builder.providers.interpreters import check_request, find, find_all
from tests.planning import ROOT, host, plan_for
from wheels.naming import wheel_name

OWN = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_each_installed_cpython_is_found_by_version(version: str) -> None:
    try:
        found = find(version)
    except PreflightError as exc:
        pytest.skip(f"CPython {version} is not on this machine: {exc.message}")
    assert found.major_minor == version
    assert found.tag == "cp" + version.replace(".", "")
    assert found.soabi.startswith(f"cpython-{version.replace('.', '')}")
    assert Path(found.executable).is_file()


def test_the_tools_own_interpreter_comes_first_for_its_version() -> None:
    assert find(OWN).executable == sys.executable


def test_a_path_is_probed_and_duplicates_are_refused() -> None:
    assert find(sys.executable).major_minor == OWN
    with pytest.raises(UsageError, match=f"two interpreters for Python {OWN}"):
        find_all([OWN, sys.executable])


def test_a_version_nowhere_here_is_a_preflight_error_with_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(PreflightError) as caught:
        find("3.99", {"PATH": str(tmp_path), "PYENV_ROOT": str(tmp_path)})
    assert caught.value.exit_code == 3
    assert "pyenv install 3.99" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ("3", "expects X.Y"),
        ("py3.12", "expects X.Y"),
        ("3.13t", "free-threaded"),
        ("/no/such/python", "no such file"),
    ],
)
def test_malformed_requests_are_usage_errors(request_: str, message: str) -> None:
    with pytest.raises(StackError, match=message) as caught:
        find(check_request(request_))
    assert caught.value.exit_code == 2


def test_pybind11_must_support_the_target_cpython() -> None:
    assert pybind11_too_old("3.13.0", "2.12.0") == (
        "pybind11 2.12.0 predates CPython 3.13 (supported from 2.13)"
    )
    assert pybind11_too_old("3.13.0", "3.0.1") is None
    assert pybind11_too_old("3.10.13", "2.6") is None  # no floor known: not refused


def test_wheel_name_takes_the_interpreters_tag() -> None:
    assert wheel_name("infini-mini", "0.1.0", "cpu", python="3.12").tag.startswith("cp312-cp312-")
    assert wheel_name("infini-mini", "0.1.0", "cpu").tag.startswith(f"cp{OWN.replace('.', '')}-")


def mini_with(tmp_path: Path, pythons: str) -> Path:
    text = (ROOT / "examples/mini-stack/stack.yaml").read_text()
    for entry in (ROOT / "examples/mini-stack").iterdir():
        if entry.name != "stack.yaml":
            (tmp_path / entry.name).symlink_to(entry)
    target = tmp_path / "stack.yaml"
    target.write_text(text + f"  pythons: {pythons}\n")
    return target


def test_manifest_reads_wheel_pythons(tmp_path: Path) -> None:
    stack = load_stack(mini_with(tmp_path, '["3.11", "3.12"]'))
    assert stack.wheel is not None and stack.wheel.pythons == ("3.11", "3.12")


def test_manifest_problems_in_wheel_pythons_are_located(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_stack(mini_with(tmp_path, '[3.10, "3.12", "3.12", "3.7", "x"]'))
    problems = "\n".join(caught.value.problems)
    assert "quote 3.1: YAML reads an unquoted 3.10 as the number 3.1" in problems
    assert "Python 3.12 is listed twice" in problems
    assert "Python 3.7 is outside requires_python '>=3.8'" in problems
    assert "'x' is not a CPython version X.Y" in problems
    assert all(p.startswith(str(tmp_path / "stack.yaml") + ":") for p in caught.value.problems)


def test_ci_matrix_releases_wheel_pythons_in_one_job_per_vendor(tmp_path: Path) -> None:
    stack = load_stack(mini_with(tmp_path, '["3.10", "3.12"]'))
    (entry,) = matrix(stack, ["cpu"])["include"]
    assert entry["pythons"] == ["3.10", "3.12"]
    assert entry["python"] == "3.12"
    assert entry["python-versions"] == "3.10\n3.12"
    assert [e["python"] for e in matrix(stack, ["cpu"], ["3.11"])["include"]] == ["3.11"]


def interpreter_host(version: str) -> object:
    """The host as builder.pipeline.targets.for_interpreter makes it for another interpreter:
    that one the target, the tool's own kept for ``python: tool`` builds."""
    tag = "cp" + version.replace(".", "")
    return dataclasses.replace(
        host(),
        python=f"/usr/bin/python{version}",
        python_version=version,
        soabi=f"cpython-{tag[2:]}-x86_64-linux-gnu",
        python_tag=tag,
        tool_python=host().tool(),
    )


def test_only_the_python_components_are_planned_per_interpreter() -> None:
    mini = ROOT / "examples/mini-stack"
    plans = {
        "cp311": plan_for("cpu", root=mini, facts=interpreter_host("3.11")),  # type: ignore[arg-type]
        "cp312": plan_for("cpu", root=mini, facts=interpreter_host("3.12")),  # type: ignore[arg-type]
    }
    assert shared_names(plans) == {"minirt", "miniops", "miniccl"}
    union = union_plan(plans)
    assert [c.name for c in union.components] == [
        "minirt",
        "miniops",
        "miniccl",
        "minilm@cp311",
        "minilm@cp312",
    ]
    lm311, lm312 = union.components[-2:]
    assert lm311.key == plans["cp311"].get("minilm").key != lm312.key
    assert lm311.build_dir != lm312.build_dir
    assert len(str(lm311.build_dir)) == len(str(lm312.build_dir))  # RUNPATH space alike
    assert set(lm312.depends) <= {"minirt", "miniops", "miniccl"}
    assert split_lane("minilm@cp312") == ("minilm", "cp312")


def test_a_python_tool_build_runs_the_tools_own_interpreter_for_every_target() -> None:
    """minirt runs a Python header generator at configure (``python: tool``): every target
    interpreter plans the build a plain release plans, with the tool's own interpreter, while
    minilm (``python: true``) gets each target's."""
    mini = ROOT / "examples/mini-stack"
    plain = plan_for("cpu", root=mini)
    for version in ("3.10", "3.12"):
        plan = plan_for("cpu", root=mini, facts=interpreter_host(version))  # type: ignore[arg-type]
        rt, lm = plan.get("minirt"), plan.get("minilm")
        assert rt.key == plain.get("minirt").key
        assert rt.defines["Python_EXECUTABLE"] == host().python
        assert rt.build_dir == plain.get("minirt").build_dir
        assert lm.defines["Python_EXECUTABLE"] == f"/usr/bin/python{version}"
        assert lm.key != plain.get("minilm").key


def test_the_real_stacks_native_libraries_and_infinilms_runtime_are_built_once_on_cpu() -> None:
    """Of the real stack for two interpreters, cpu builds only InfiniLM's extension modules per
    interpreter; nvidia builds InfiniOps (WITH_TORCH) and what links it per interpreter too."""
    plans = {
        v: {
            tag: plan_for(v, facts=interpreter_host(version))  # type: ignore[arg-type]
            for tag, version in (("cp310", "3.10"), ("cp313", "3.13"))
        }
        for v in ("cpu", "nvidia")
    }
    assert shared_names(plans["cpu"]) == {"infinirt", "infiniops", "infiniccl", "infinilm-runtime"}
    assert shared_names(plans["nvidia"]) == {"infinirt", "cutlass", "infiniccl"}
    union = [c.name for c in union_plan(plans["cpu"]).components]
    assert union[-2:] == ["infinilm@cp310", "infinilm@cp313"]


def test_a_recipe_reads_python_true_tool_and_false_per_vendor(tmp_path: Path) -> None:
    stack = load_stack(ROOT / "examples/mini-stack/stack.yaml")
    assert stack.components["minirt"].recipe.python_for("cpu") == "tool"
    assert stack.components["minilm"].recipe.python_for("cpu") == "target"
    assert stack.components["miniccl"].recipe.python_for("cpu") == ""
    real = load_stack(ROOT / "stack.yaml")
    assert real.components["infiniops"].recipe.python_for("cpu") == "tool"
    assert real.components["infiniops"].recipe.python_for("nvidia") == "target"  # WITH_TORCH


def test_a_plain_plan_keeps_its_keys_and_directories() -> None:
    mini = ROOT / "examples/mini-stack"
    plain = plan_for("cpu", root=mini)
    tagged = plan_for("cpu", root=mini, facts=dataclasses.replace(host(), python_tag="cp311"))
    assert [c.key for c in plain.components] == [c.key for c in tagged.components]
    assert plain.get("minirt").build_dir == tagged.get("minirt").build_dir
