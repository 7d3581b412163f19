"""Recipe patches: applied in order to the per-build checkout (never to the git cache), part of
the key, listed by plan and the SBOM; a patch that does not apply names its file and hunk."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import MINI, ROOT
from tests.gitrepos import git, init_repo

pytestmark = pytest.mark.integration

RT_HEADER = "include/mini/rt.h"


def diff(path: str, old: str, new: str) -> str:
    """A unified diff turning ``old`` into ``new`` at ``path``, as ``git apply`` takes it."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def minirt_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """The mini stack's runtime, committed to a git repository: (repo, sha, header text)."""
    repo = tmp_path / "minirt"
    files = {
        str(p.relative_to(MINI / "rt")): p.read_text()
        for p in (MINI / "rt").rglob("*")
        if p.is_file()
    }
    return repo, init_repo(repo, files), files[RT_HEADER]


def stack_with_patches(tmp_path: Path, repo: Path, sha: str, patches: dict[str, str]) -> Path:
    """A stack whose one component is the git MiniRT, with ``patches`` (name -> text) in order."""
    root = tmp_path / "stack"
    (root / "components" / "minirt" / "patches").mkdir(parents=True, exist_ok=True)
    recipe = (MINI / "components" / "minirt.yaml").read_text()
    names = list(patches)
    for name, text in patches.items():
        (root / "components" / "minirt" / "patches" / name).write_text(text)
    listed = ", ".join(f"patches/{n}" for n in names)
    (root / "components" / "minirt.yaml").write_text(
        recipe + (f"patches: [{listed}]\n" if names else "")
    )
    (root / "stack.yaml").write_text(
        f"vendors:\n  cpu: {{}}\ncomponents:\n  minirt:\n    git: {repo}\n    rev: {sha}\n"
    )
    return root / "stack.yaml"


@pytest.fixture
def two_patches(tmp_path: Path) -> tuple[Path, str, str, dict[str, str]]:
    """MiniRT in git and two patches, the second editing a line only the first adds."""
    repo, sha, header = minirt_repo(tmp_path)
    marker = "#define MINI_RT_H\n"
    first = header.replace(marker, marker + "#define MINI_RT_PATCHED 1\n")
    second = first.replace("#define MINI_RT_PATCHED 1\n", "#define MINI_RT_PATCHED 2\n")
    patches = {
        "01-mark.patch": diff(RT_HEADER, header, first),
        "02-bump.patch": diff(RT_HEADER, first, second),
    }
    return repo, sha, header, patches


def object_count(cache: Path) -> str:
    return git(cache, "count-objects", "-v")


def test_patches_apply_in_order_to_the_checkout_and_the_build_shows_the_change(
    tmp_path: Path, home: Path, cli, two_patches
) -> None:  # type: ignore[no-untyped-def]
    repo, sha, header, patches = two_patches
    stack = stack_with_patches(tmp_path, repo, sha, patches)
    result = cli("build", "--manifest", stack, "--vendor", "cpu", "--launcher", "none")
    assert result.code == 0, result.err
    (entry,) = (p for p in (home / "store").iterdir() if not p.name.startswith("."))
    installed = (entry / "prefix" / RT_HEADER).read_text()
    assert "#define MINI_RT_PATCHED 2" in installed  # both, in order: 02 edits what 01 adds
    assert "#define MINI_RT_PATCHED 1" not in installed
    (cache,) = (home / "git").iterdir()
    # The shared cache is never patched: its blob of the header is the pinned one.
    assert git(cache, "show", f"{sha}:{RT_HEADER}") == header.rstrip("\n")
    (checkout,) = (home / "src").iterdir()
    assert git(checkout, "rev-parse", "HEAD") == sha  # the pin, with the patches on top


def test_the_git_cache_gains_no_object_from_patching(
    tmp_path: Path, home: Path, cli, two_patches
) -> None:  # type: ignore[no-untyped-def]
    repo, sha, _, patches = two_patches
    plain = stack_with_patches(tmp_path / "plain", repo, sha, {})
    assert cli("fetch", "--manifest", plain, "--vendor", "cpu").code == 0
    (cache,) = (home / "git").iterdir()
    before = object_count(cache)
    patched = stack_with_patches(tmp_path / "patched", repo, sha, patches)
    result = cli("fetch", "--manifest", patched, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert object_count(cache) == before
    trees = sorted((home / "src").iterdir())
    assert len(trees) == 2  # a patched checkout is another key's tree


def test_a_patch_is_part_of_the_key_and_plan_lists_it(
    tmp_path: Path, home: Path, cli, two_patches
) -> None:  # type: ignore[no-untyped-def]
    repo, sha, _, patches = two_patches

    def plan(stack: Path) -> dict[str, object]:
        result = cli("plan", "--manifest", stack, "--vendor", "cpu", "--json")
        assert result.code == 0, result.err
        (component,) = json.loads(result.out)["components"]
        return component  # type: ignore[no-any-return]

    bare = plan(stack_with_patches(tmp_path / "a", repo, sha, {}))
    one = plan(stack_with_patches(tmp_path / "b", repo, sha, dict(list(patches.items())[:1])))
    both = plan(stack_with_patches(tmp_path / "c", repo, sha, patches))
    assert len({bare["key"], one["key"], both["key"]}) == 3
    assert bare["patches"] == []
    assert [p["name"] for p in both["patches"]] == [
        "patches/01-mark.patch",
        "patches/02-bump.patch",
    ]
    edited = dict(patches)
    edited["02-bump.patch"] = edited["02-bump.patch"].replace("PATCHED 2", "PATCHED 3")
    assert plan(stack_with_patches(tmp_path / "d", repo, sha, edited))["key"] != both["key"]
    text = cli(
        "plan",
        "--manifest",
        stack_with_patches(tmp_path / "e", repo, sha, patches),
        "--vendor",
        "cpu",
    ).out
    assert "#  patch: patches/01-mark.patch" in text and "#  patch: patches/02-bump.patch" in text


def test_a_patch_that_does_not_apply_names_its_file_and_hunk_and_exits_4(
    tmp_path: Path, home: Path, cli, two_patches
) -> None:  # type: ignore[no-untyped-def]
    repo, sha, _, patches = two_patches
    reversed_order = {"02-bump.patch": patches["02-bump.patch"]}  # its context is not there
    stack = stack_with_patches(tmp_path, repo, sha, reversed_order)
    result = cli("build", "--manifest", stack, "--vendor", "cpu", "--launcher", "none")
    assert result.code == 4, result.err
    assert f"patch patches/02-bump.patch does not apply to component 'minirt' at {sha}" in (
        result.err
    )
    assert f"hunk 1 of {RT_HEADER} (@@ -1," in result.err
    assert "Traceback" not in result.err
    assert not (home / "src").exists() or not any((home / "src").iterdir())  # nothing half-made


def test_a_patched_checkout_changed_underneath_is_refused(
    tmp_path: Path, home: Path, cli, two_patches
) -> None:  # type: ignore[no-untyped-def]
    repo, sha, _, patches = two_patches
    stack = stack_with_patches(tmp_path, repo, sha, patches)
    assert cli("fetch", "--manifest", stack, "--vendor", "cpu").code == 0
    assert cli("fetch", "--manifest", stack, "--vendor", "cpu").code == 0  # intact: reused
    (checkout,) = (home / "src").iterdir()
    (checkout / RT_HEADER).write_text("/* edited by hand */\n")
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert "patched source tree of component 'minirt' changed underneath" in result.err


def test_patches_on_a_path_source_are_a_manifest_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "stack"
    shutil.copytree(MINI, root)
    (root / "components" / "minirt" / "patches").mkdir(parents=True)
    (root / "components" / "minirt" / "patches" / "x.patch").write_text("")
    recipe = root / "components" / "minirt.yaml"
    recipe.write_text(recipe.read_text() + "patches: [patches/x.patch]\n")
    result = cli("validate", "--manifest", root / "stack.yaml")
    assert result.code == 2
    assert "minirt.yaml:" in result.err
    assert "a path source, which is built in place: patches apply to a git checkout" in result.err


def test_a_missing_patch_file_is_located_in_the_recipe(tmp_path: Path, cli, two_patches) -> None:  # type: ignore[no-untyped-def]
    repo, sha, _, _ = two_patches
    stack = stack_with_patches(tmp_path, repo, sha, {})
    recipe = stack.parent / "components" / "minirt.yaml"
    text = recipe.read_text()
    cpu = "  cpu:    {options: {WITH_CPU: ON}}"
    assert cpu in text
    recipe.write_text(
        text.replace(cpu, "  cpu: {options: {WITH_CPU: ON}, patches: [patches/gone.patch]}")
    )
    result = cli("validate", "--manifest", stack)
    assert result.code == 2
    line = 1 + recipe.read_text().splitlines().index(
        "  cpu: {options: {WITH_CPU: ON}, patches: [patches/gone.patch]}"
    )
    assert f"minirt.yaml:{line}:" in result.err
    assert "patch 'patches/gone.patch' does not exist" in result.err


def test_the_sbom_records_the_patches_as_pedigree(tmp_path: Path, home: Path, two_patches) -> None:
    """CycloneDX pedigree patches, with the diff text, on the patched component."""
    from builder.pipeline import sbom
    from builder.pipeline.context import open_context, plan_for
    from builder.pipeline.requests import PlanRequest, StackRequest

    repo, sha, _, patches = two_patches
    stack = stack_with_patches(tmp_path, repo, sha, patches)
    ctx = open_context(StackRequest(vendor="cpu", manifest=stack, home=home))
    plan = plan_for(ctx, PlanRequest())
    inputs = sbom.SbomInputs(plan=plan, wheel=None, files={}, owners={}, requires=(), epoch=0)
    data = json.loads(sbom.render(inputs))
    (entry,) = (c for c in data["components"] if c.get("name") == "minirt")
    listed = entry["pedigree"]["patches"]
    assert [p["type"] for p in listed] == ["unofficial", "unofficial"]
    assert listed[0]["diff"]["text"]["content"] == patches["01-mark.patch"]
    assert "patches/02-bump.patch" in entry["pedigree"]["notes"]


def preimage(patch: Path) -> tuple[str, str]:
    """(path, text) of a file that a one-file patch applies to: each hunk's context and removed
    lines at the line it names, stand-in lines between."""
    text = patch.read_text()
    path = text.split("\n--- a/", 1)[1].split("\n", 1)[0]
    lines: list[str] = []
    for hunk in text.split("\n@@ ")[1:]:
        start = int(hunk.split()[0].lstrip("-").split(",")[0])
        lines += [f"// line {i} of the stand-in file" for i in range(len(lines) + 1, start)]
        body = hunk.split("\n-- \n")[0].splitlines()[1:]
        lines += [line[1:] for line in body if line.startswith((" ", "-"))]
    return path, "\n".join(lines) + "\n"


def patched(patch: Path, tmp_path: Path) -> str:
    """The file ``patch`` changes, after ``git apply`` in a repository holding its preimage."""
    path, text = preimage(patch)
    repo = tmp_path / "repo"
    init_repo(repo, {path: text})
    git(repo, "apply", "--index", str(patch))
    return (repo / path).read_text()


def test_the_infiniccl_cpu_patch_applies_to_a_tree_of_its_layout(tmp_path: Path) -> None:
    """components/infiniccl/patches/cpu-memory-space.patch against a repository with InfiniCCL's
    layout: src/devices/cpu/device_.h whose lines around the hunk are those the patch names."""
    patch = ROOT / "components" / "infiniccl" / "patches" / "cpu-memory-space.patch"
    assert preimage(patch)[0] == "src/devices/cpu/device_.h"
    text = patched(patch, tmp_path)
    assert "MemorySpace GetMemorySpace<Device::Type::kCpu>(const void* /*ptr*/) {" in text
    assert "return MemorySpace::kHost;" in text


def test_the_infinilm_sampling_patch_applies_to_a_tree_of_its_layout(tmp_path: Path) -> None:
    """components/infinilm-runtime/patches/nvidia-sampling-dispatch.patch: the active
    implementations come from libinfiniops' exported dispatch function, the temperature factor
    has the logits' shape."""
    patch = ROOT / "components" / "infinilm-runtime" / "patches" / "nvidia-sampling-dispatch.patch"
    path, _ = preimage(patch)
    assert path == "csrc/infinicore/src/ops/random_sample/random_sample_infiniops.cc"
    text = patched(patch, tmp_path)
    assert "generated_dispatch::\n            ActiveImplementationIndicesFor" in text
    assert "TopKTopPSamplingFromLogits::active_implementation_indices" not in text
    assert "inverse_temperature = Tensor::empty(logits_2d->shape()" in text
