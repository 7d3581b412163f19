"""CI workflow templates: valid GitHub workflows (check-jsonschema's vendored schema, offline),
wired to the matrix that `infini-stack ci matrix` generates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / "ci" / "workflows").glob("*.yml"))


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def check_jsonschema() -> list[str]:
    return [sys.executable, "-m", "check_jsonschema"]


def test_there_is_a_main_workflow_and_a_reusable_one() -> None:
    names = {p.name for p in WORKFLOWS}
    assert {"stack.yml", "validate-pin.yml"} <= names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid_against_the_github_workflow_schema_offline(workflow: Path) -> None:
    # --builtin-schema uses the copy vendored in check-jsonschema: no network is needed.
    done = subprocess.run(
        [*check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        check=False,
        # Any attempt to reach the network goes to a closed port and fails.
        env={
            **os.environ,
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9",
            "http_proxy": "http://127.0.0.1:9",
            "NO_PROXY": "",
            "no_proxy": "",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("name: x\non: push\njobs:\n  a:\n    steps: 3\n")
    done = subprocess.run(
        [*check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    # Rejected by the schema, naming the bad job (not a crash or a missing tool).
    assert "Schema validation errors" in done.stdout and "$.jobs.a" in done.stdout, done.stderr


@pytest.mark.parametrize("name", ["stack.yml", "validate-pin.yml"])
def test_vendor_jobs_take_their_matrix_from_the_generating_job(name: str) -> None:
    jobs = load(ROOT / "ci" / "workflows" / name)["jobs"]
    assert "infini-stack ci matrix" in "\n".join(s.get("run", "") for s in jobs["matrix"]["steps"])
    assert jobs["matrix"]["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    stack = jobs["stack"]
    assert stack["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    assert stack["runs-on"] == "${{ matrix.runs-on }}"
    assert stack["container"] == "${{ matrix.container }}"
    runs = "\n".join(s.get("run", "") for s in stack["steps"])
    for session in ("preflight", "build", "wheel", "audit"):
        assert f"{session}(vendor='${{{{ matrix.vendor }}}}')" in runs
    assert stack["env"]["INFINI_STACK_STRICT"] == "1"


def test_main_workflow_lints_and_uploads_wheels_sboms_and_run_reports() -> None:
    jobs = load(ROOT / "ci" / "workflows" / "stack.yml")["jobs"]
    assert "nox -s lint" in "\n".join(s.get("run", "") for s in jobs["lint"]["steps"])
    steps = jobs["stack"]["steps"]
    assert any(s.get("run") == 'python -m nox -s "${{ matrix.session }}"' for s in steps)
    uploads = [
        s["with"]["path"]
        for s in steps
        if str(s.get("uses", "")).startswith("actions/upload-artifact")
    ]
    assert any("dist/release/" in p for p in uploads)  # wheel, SBOM, SHA256SUMS, reports
    assert any("/runs/" in p for p in uploads)


def test_reusable_workflow_is_called_with_a_component_and_a_sha() -> None:
    call = load(ROOT / "ci" / "workflows" / "validate-pin.yml")["on"]["workflow_call"]
    inputs = call["inputs"]
    assert inputs["component"]["required"] and inputs["sha"]["required"]
    assert inputs["stack-ref"]["default"] == "main"
    assert all(i["type"] in ("string", "boolean", "number") for i in inputs.values())


def test_vendor_jobs_pull_from_the_registry_and_push_only_on_main() -> None:
    stack = load(ROOT / "ci" / "workflows" / "stack.yml")["jobs"]["stack"]
    env = stack["env"]
    assert env["INFINI_STACK_CACHE_PASSWORD"] == "${{ secrets.GITHUB_TOKEN }}"
    assert "refs/heads/main" in env["CACHE_PUSH"] and "'--push'" in env["CACHE_PUSH"]
    assert stack["permissions"]["packages"] == "write"
    runs = [s.get("run", "") for s in stack["steps"]]
    assert any("INFINI_STACK_CACHE=" in r and "ghcr.io" in r for r in runs)
    assert any(
        r.startswith('python -m nox -s "build(') and r.endswith("-- $CACHE_PUSH") for r in runs
    )
