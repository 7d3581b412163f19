"""Loading stack.yaml and recipes: every error class, located as FILE:LINE:COL, all at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builder.core.errors import ManifestError
from builder.manifest.loader import MANIFEST_ENV, default_manifest, load_stack
from builder.manifest.model import PathSource
from tests.planning import REAL_ORDER

ROOT = Path(__file__).resolve().parents[2]
SHA = "a" * 40


def write_stack(tmp_path: Path, text: str, recipes: dict[str, str] | None = None) -> Path:
    (tmp_path / "components").mkdir(exist_ok=True)
    for name, body in (recipes or {}).items():
        (tmp_path / "components" / f"{name}.yaml").write_text(body)
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return path


RECIPE_CPU = "vendors:\n  cpu: {options: {WITH_CPU: ON}}\n"


def problems(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_stack(path)
    return list(info.value.problems)


def test_real_stack_yaml_loads_with_its_six_components_in_order_and_four_vendors() -> None:
    stack = load_stack(ROOT / "stack.yaml")
    assert stack.order == REAL_ORDER
    assert set(stack.vendors) == {"cpu", "nvidia", "moore", "thead"}


def test_mini_stack_loads_with_path_sources() -> None:
    stack = load_stack(ROOT / "examples" / "mini-stack" / "stack.yaml")
    assert stack.order == ("minirt", "miniops", "miniccl", "minilm")
    assert all(isinstance(c.source, PathSource) for c in stack.components.values())
    assert stack.wheel is not None and stack.wheel.bundle == ("minirt", "miniops", "miniccl")


def test_without_a_stack_yaml_here_the_default_manifest_is_the_bundled_mini_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    found = default_manifest()
    assert found == ROOT / "examples" / "mini-stack" / "stack.yaml"
    assert load_stack(found).order == ("minirt", "miniops", "miniccl", "minilm")
    (tmp_path / "stack.yaml").write_text("schema: 1\n")
    assert default_manifest() == Path("stack.yaml")


def test_malformed_yaml_is_reported_with_line_and_column(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "vendors:\n  cpu: {}\ncomponents: [unclosed\n")
    (found,) = problems(path)
    assert found.startswith(f"{path}:4:1: ")
    assert "invalid YAML" in found


def test_misspelled_key_gets_did_you_mean_with_location(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        f"vendors:\n  cpu: {{}}\ncomponents:\n  rt:\n    git: https://x/rt.git\n    rev: {SHA}\n"
        "    optoins: {A: 1}\n",
        {"rt": RECIPE_CPU},
    )
    (found,) = problems(path)
    assert found.endswith(":7:5: unknown key 'optoins' in 'components.rt'; did you mean 'options'?")


def test_branch_name_as_pin_is_rejected_with_lock_hint(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  rt:\n    git: https://x/rt.git\n    rev: main\n",
        {"rt": RECIPE_CPU},
    )
    (found,) = problems(path)
    assert ":6:10: a git pin must be a full 40-hex commit SHA, not 'main'" in found
    assert "infini-stack lock" in found


def test_short_sha_is_rejected(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  rt:\n    git: https://x/rt.git\n    rev: a38977e\n",
        {"rt": RECIPE_CPU},
    )
    assert "full 40-hex commit SHA, not 'a38977e'" in problems(path)[0]


def test_path_source_must_exist(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path, "vendors:\n  cpu: {}\ncomponents:\n  rt: {path: nowhere}\n", {"rt": RECIPE_CPU}
    )
    (found,) = problems(path)
    assert ":4:14: path source 'nowhere' is not a directory" in found


def test_dependency_cycle_is_reported_with_its_members(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n  b: {path: src}\n",
        {"a": "depends: [b]\n" + RECIPE_CPU, "b": "depends: [a]\n" + RECIPE_CPU},
    )
    (found,) = problems(path)
    assert "dependency cycle:" in found
    assert "a -> b" in found or "b -> a" in found
    assert ":4:3:" in found or ":5:3:" in found


def test_unknown_component_in_recipe_depends_is_located_in_the_recipe(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n",
        {"a": "depends: [rtt]\n" + RECIPE_CPU},
    )
    (found,) = problems(path)
    assert "a.yaml:1:11: unknown component 'rtt'" in found


def test_unknown_vendor_gets_a_suggestion(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path, "vendors:\n  nvidai: {}\ncomponents:\n  a: {path: src}\n", {"a": RECIPE_CPU}
    )
    found = problems(path)
    assert any(":2:3: unknown vendor 'nvidai'; did you mean 'nvidia'?" in p for p in found)


def test_vendor_a_component_does_not_support_names_component_and_vendor(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\n  moore: {}\ncomponents:\n  a: {path: src}\n",
        {"a": RECIPE_CPU},
    )
    (found,) = problems(path)
    assert ":3:3: component 'a' does not support vendor 'moore'" in found
    assert "supports: cpu" in found


RECIPE_BOTH = "vendors:\n  cpu: {}\n  nvidia: {}\n"
ONLY_NVIDIA = (
    "vendors:\n  cpu: {}\n  nvidia: {}\ncomponents:\n"
    "  heads: {path: src, only: [nvidia]}\n  ops: {path: src}\n"
)


def test_component_only_in_some_stacks_and_a_vendor_dependency_plan_per_vendor(
    tmp_path: Path,
) -> None:
    path = write_stack(
        tmp_path,
        ONLY_NVIDIA,
        {
            "heads": "vendors:\n  nvidia: {}\n",
            "ops": "dependency_vars: {HEADS_DIR: heads}\n"
            "vendors:\n  cpu: {}\n  nvidia: {depends: [heads]}\n",
        },
    )
    stack = load_stack(path)
    assert stack.names_for("cpu") == ("ops",) and stack.names_for("nvidia") == ("heads", "ops")
    ops = stack.components["ops"].recipe
    assert ops.depends_for("cpu") == () and ops.depends_for("nvidia") == ("heads",)
    assert ops.dependency_vars_for("cpu") == {}
    assert ops.dependency_vars_for("nvidia") == {"HEADS_DIR": "heads"}
    assert stack.selected("nvidia", ("ops",)) == ("heads", "ops")


def test_a_dependency_a_vendors_stack_leaves_out_is_located_at_its_only(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        ONLY_NVIDIA.replace("only: [nvidia]", "only: [nvidai]"),
        {"heads": RECIPE_BOTH, "ops": "depends: [heads]\n" + RECIPE_BOTH},
    )
    (found,) = problems(path)
    assert ":5:29: unknown vendor 'nvidai' in 'vendors'; did you mean 'nvidia'?" in found
    path = write_stack(
        tmp_path, ONLY_NVIDIA, {"heads": RECIPE_BOTH, "ops": "depends: [heads]\n" + RECIPE_BOTH}
    )
    (found_once,) = problems(path)
    assert ":5:28: component 'ops' depends on 'heads' for cpu, but 'heads' is only in the " in (
        found_once
    )
    assert found_once.endswith("stack of: nvidia")


def test_unknown_component_in_a_vendor_depends_is_located_in_the_recipe(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n",
        {"a": "vendors:\n  cpu: {depends: [rtt]}\n"},
    )
    (found,) = problems(path)
    assert "a.yaml:2:19: unknown component 'rtt'" in found


def test_alias_ali_is_accepted_as_thead(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  ali: {}\ncomponents:\n  a: {path: src}\n",
        {"a": "vendors:\n  thead: {}\n"},
    )
    assert set(load_stack(path).vendors) == {"thead"}


def test_malformed_provider_specifier_is_located(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu:\n    providers:\n      cmake: '>>3.18'\ncomponents:\n  a: {path: src}\n",
        {"a": RECIPE_CPU},
    )
    (found,) = problems(path)
    assert ":4:14: '>>3.18' is not a PEP 440 version specifier" in found


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "build_type: Fast\nvendors:\n  cpu: {}\n  cpu: {}\ncomponents:\n  a: {path: src, oops: 1}\n"
        "  b:\n    git: https://x/b.git\n    rev: v1.0\n",
        {"a": RECIPE_CPU, "b": RECIPE_CPU},
    )
    found = problems(path)
    assert len(found) == 4
    joined = "\n".join(found)
    assert "unknown build_type 'Fast'" in joined
    assert "duplicate key 'cpu'" in joined
    assert "unknown key 'oops'" in joined
    assert "not 'v1.0'" in joined


def test_missing_recipe_is_named(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n")
    (found,) = problems(path)
    assert "component 'a' has no recipe" in found


def test_wrong_types_are_located(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n",
        {"a": "depends: rt\npython: maybe\nvendors:\n  cpu:\n    python: 3\n"},
    )
    found = "\n".join(problems(path))
    assert "a.yaml:1:10: 'depends' must be a list" in found
    assert "a.yaml:2:9: 'python' must be true (built for the wheel's interpreter), tool" in found
    assert "'vendors.cpu.python' must be true (built for the wheel's interpreter), tool" in found


def test_cli_validate_exits_2_without_traceback(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = write_stack(tmp_path, "vendors: [cpu\n")
    result = cli("validate", "--manifest", path)
    assert result.code == 2
    assert "invalid YAML" in result.err
    assert "Traceback" not in result.err


def test_cli_validate_ok_on_the_real_manifest(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("validate", "--manifest", ROOT / "stack.yaml")
    assert result.code == 0
    assert "6 components" in result.out


def test_per_vendor_override_changes_only_that_vendor(tmp_path: Path) -> None:
    other = "b" * 40
    path = write_stack(
        tmp_path,
        f"vendors:\n  cpu: {{}}\n  thead: {{}}\ncomponents:\n  rt:\n    git: https://x/rt.git\n"
        f"    rev: {SHA}\n    vendors:\n      ali:\n        rev: {other}\n"
        "        options: {EXTRA: ON}\n",
        {"rt": "vendors:\n  cpu: {}\n  thead: {options: {WITH_THEAD: ON}}\n"},
    )
    rt = load_stack(path).components["rt"]
    assert rt.source_for("cpu").rev == SHA  # type: ignore[union-attr]
    assert rt.source_for("thead").rev == other  # type: ignore[union-attr]
    assert rt.source_for("thead").url == "https://x/rt.git"  # type: ignore[union-attr]
    assert rt.options_for("thead") == {"WITH_THEAD": "ON", "EXTRA": "ON"}
    assert rt.options_for("cpu") == {}


def test_copy_of_mini_stack_validates(tmp_path: Path) -> None:
    target = tmp_path / "m"
    shutil.copytree(ROOT / "examples" / "mini-stack", target)
    assert load_stack(target / "stack.yaml").components["minirt"].recipe.test is not None


def test_unknown_provider_name_is_located_with_a_suggestion(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu:\n    providers:\n      cmak: '>=3.18'\ncomponents:\n  a: {path: src}\n",
        {"a": RECIPE_CPU},
    )
    (found,) = problems(path)
    assert ":4:7: unknown cpu provider 'cmak'; did you mean 'cmake'?" in found


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("all", None),
        ("none", frozenset()),
        ("[third_party/json/, x]", frozenset({"third_party/json", "x"})),
    ],
)
def test_recipe_submodules_selection(tmp_path: Path, value: str, expected: object) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n",
        {"a": f"submodules: {value}\n" + RECIPE_CPU},
    )
    assert load_stack(path).components["a"].recipe.submodules == expected


def test_recipe_submodules_rejects_other_words(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "vendors:\n  cpu: {}\ncomponents:\n  a: {path: src}\n",
        {"a": "submodules: some\n" + RECIPE_CPU},
    )
    (found,) = problems(path)
    assert "a.yaml:1:13: 'submodules' must be all, none or a list" in found


def test_vendor_linked_files_resolve_next_to_the_manifest_and_a_missing_one_is_located(
    tmp_path: Path,
) -> None:
    (tmp_path / "linked.yaml").write_text("linked: {}\n")
    text = "vendors:\n  cpu:\n    linked: [linked.yaml{extra}]\ncomponents:\n  a: {{path: src}}\n"
    path = write_stack(tmp_path, text.format(extra=""), {"a": RECIPE_CPU})
    assert load_stack(path).vendors["cpu"].linked == (tmp_path / "linked.yaml",)
    path = write_stack(tmp_path, text.format(extra=", nope.yaml"), {"a": RECIPE_CPU})
    (found,) = problems(path)
    assert ":3:27: linked providers file not found: " in found and "nope.yaml" in found
