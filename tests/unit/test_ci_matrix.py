"""`infini-stack ci matrix`: the GitHub Actions matrix derived from stack.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from builder.ci import matrix, session_name
from builder.manifest.loader import load_stack
from tests.conftest import MINI, ROOT

STACK = ROOT / "stack.yaml"


def declared() -> dict[str, dict[str, object]]:
    data = yaml.safe_load(STACK.read_text())
    return {name: (entry or {}).get("ci", {}) for name, entry in data["vendors"].items()}


def test_root_matrix_has_one_job_per_declared_vendor_with_its_runners_image_and_session(
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("ci", "matrix", "--manifest", STACK)
    assert result.code == 0, result.err
    assert len(result.out.strip().splitlines()) == 1  # ready for $GITHUB_OUTPUT
    include = json.loads(result.out)["include"]
    ci = declared()
    assert [e["vendor"] for e in include] == list(ci)
    for entry in include:
        vendor = entry["vendor"]
        assert entry["python"] == "3.11"
        assert entry["runs-on"] == ci[vendor]["runs-on"]
        assert entry.get("container") == ci[vendor].get("image")
        assert entry["session"] == f"release(vendor='{vendor}')"
        assert set(entry) <= {"vendor", "python", "runs-on", "container", "session"}


def test_vendor_without_an_image_has_no_container_key() -> None:
    include = matrix(load_stack(STACK))["include"]
    for entry in include:
        if not declared()[entry["vendor"]].get("image"):
            assert "container" not in entry


def test_filtered_vendor_and_pythons_give_their_product_and_aliases_resolve(
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli(
        "ci",
        "matrix",
        "--manifest",
        STACK,
        "--vendor",
        "ali",
        "--python",
        "3.11",
        "--python",
        "3.12",
    )
    assert result.code == 0, result.err
    include = json.loads(result.out)["include"]
    assert [(e["vendor"], e["python"]) for e in include] == [("thead", "3.11"), ("thead", "3.12")]
    assert {e["session"] for e in include} == {"release(vendor='thead')"}


def test_unknown_vendor_is_a_usage_error_with_a_suggestion(
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("ci", "matrix", "--manifest", STACK, "--vendor", "nvidai")
    assert result.code == 2
    assert "unknown vendor 'nvidai'" in result.err
    assert "did you mean 'nvidia'" in result.err
    assert result.out == ""


def test_vendor_known_to_the_tool_but_not_declared_in_the_manifest_is_a_usage_error(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    text = (MINI / "stack.yaml").read_text()
    assert "  moore: {check: components/checks/engine.py}\n" in text
    text = text.replace("  moore: {check: components/checks/engine.py}\n", "")
    manifest = MINI / "stack.yaml"
    copy = tmp_path / "stack.yaml"
    copy.write_text(text.replace("recipes: components", f"recipes: {MINI / 'components'}"))
    for name in ("rt", "ops", "ccl", "engine"):
        (tmp_path / name).symlink_to(manifest.parent / name)
    (tmp_path / "components").symlink_to(manifest.parent / "components")  # the checks
    result = cli("ci", "matrix", "--manifest", copy, "--vendor", "moore")
    assert result.code == 2
    assert "vendor 'moore' is not declared" in result.err


@pytest.mark.parametrize("python", ["3", "py3.11", "3.11.4", "2.7"])
def test_python_must_be_x_y_and_allowed_by_requires_python(
    python: str,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("ci", "matrix", "--manifest", STACK, "--python", python)
    assert result.code == 2
    assert python in result.err


def test_session_names_match_the_ids_nox_gives_parametrized_sessions() -> None:
    assert session_name("wheel", "nvidia") == "wheel(vendor='nvidia')"
