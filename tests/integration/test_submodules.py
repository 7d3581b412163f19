"""Submodules fetched at their gitlinks from local repositories: through the shared cache and
mirrors, nested and relative ones, only those a recipe selects, never from the network twice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.gitrepos import (
    PUBLIC,
    add_submodule,
    cmake_library,
    commit,
    git,
    init_repo,
    mirror,
    public_stack,
)

pytestmark = pytest.mark.integration


def manifest(
    root: Path, pins: dict[str, str], submodules: str = "all", options: str = "{}"
) -> Path:
    return public_stack(root, pins, f"submodules: {submodules}\noptions: {options}\n")


@pytest.fixture
def mirrors(tmp_path: Path) -> Path:
    """lm.git with third_party/json (pinned at an older commit) whose own submodule is nested,
    and a relative submodule ../spdlog.git; all under one mirror directory."""
    root = tmp_path / "mirrors"
    inner = init_repo(root / "inner.git", {"inner.h": "// inner\n"})
    init_repo(root / "json.git", {"json.hpp": "// v1\n"})
    add_submodule(root / "json.git", f"{PUBLIC}/inner.git", "deps/inner", inner, root)
    json_pinned = commit(root / "json.git", {}, "nested submodule")
    commit(root / "json.git", {"json.hpp": "// v2\n"}, "newer")
    spdlog = init_repo(root / "spdlog.git", {"spdlog.h": "// spdlog\n"})
    top = root / "lm.git"
    init_repo(top, cmake_library("lm"))
    add_submodule(top, f"{PUBLIC}/json.git", "third_party/json", json_pinned, root)
    add_submodule(top, "../spdlog.git", "third_party/spdlog", spdlog, root)
    commit(top, {}, "pin submodules")
    return root


def lm_sha(mirrors: Path) -> str:
    return git(mirrors / "lm.git", "rev-parse", "HEAD")


def test_nested_and_relative_submodules_are_checked_out_at_their_gitlinks(
    tmp_path: Path,
    home: Path,
    mirrors: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = manifest(tmp_path / "s", {"lm": lm_sha(mirrors)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--mirror", mirror(mirrors))
    assert result.code == 0, result.err
    tree = Path(result.out.split()[-1])
    assert (tree / "third_party" / "json" / "json.hpp").read_text() == "// v1\n"
    pinned = git(mirrors / "json.git", "rev-parse", "HEAD~1")  # the gitlink, not the newest
    assert git(tree / "third_party" / "json", "rev-parse", "HEAD") == pinned
    assert (tree / "third_party" / "json" / "deps" / "inner" / "inner.h").is_file()
    assert (tree / "third_party" / "spdlog" / "spdlog.h").is_file()
    # The checkout names the public URLs, never the cache it was filled from.
    assert git(tree / "third_party" / "json", "remote", "get-url", "origin") == f"{PUBLIC}/json.git"
    assert git(tree / "third_party" / "spdlog", "remote", "get-url", "origin") == (
        f"{PUBLIC}/spdlog.git"
    )
    assert git(tree, "config", "submodule.third_party/json.url") == f"{PUBLIC}/json.git"


def test_submodules_live_in_the_shared_cache_so_a_second_checkout_needs_no_mirror(
    tmp_path: Path,
    home: Path,
    mirrors: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = manifest(tmp_path / "s", {"lm": lm_sha(mirrors)})
    assert (
        cli("fetch", "--manifest", stack, "--vendor", "cpu", "--mirror", mirror(mirrors)).code == 0
    )
    caches = sorted(p.name.rsplit("-", 1)[0] for p in (home / "git").iterdir())
    assert caches == ["inner", "json", "lm", "spdlog"]
    # Another build key (a recipe option changed) means another checkout: with the mirror gone
    # it can only come from the cache.
    shutil.rmtree(mirrors)
    stack = manifest(tmp_path / "s", {"lm": lm_sha_from_cache(home)}, options="{SOME_OPTION: ON}")
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 0, result.err
    tree = Path(result.out.split()[-1])
    assert (tree / "third_party" / "json" / "deps" / "inner" / "inner.h").is_file()


def lm_sha_from_cache(home: Path) -> str:
    (cache,) = (p for p in (home / "git").iterdir() if p.name.startswith("lm-"))
    return git(cache, "rev-parse", "refs/heads/main")


def test_recipe_selects_submodules_and_an_unpublished_gitlink_outside_it_is_not_fetched(
    tmp_path: Path,
    home: Path,
    mirrors: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    # As InfiniOps' .ci: a submodule whose gitlink its repository does not publish.
    top = mirrors / "lm.git"
    ci = init_repo(mirrors / "ci.git", {"ci.yml": "x\n"})
    add_submodule(top, f"{PUBLIC}/ci.git", ".ci", ci, mirrors)
    git(mirrors / "ci.git", "commit", "-q", "--amend", "-m", "rewritten")
    git(mirrors / "ci.git", "reflog", "expire", "--expire=now", "--all")
    git(mirrors / "ci.git", "gc", "-q", "--prune=now")
    sha = commit(top, {}, "add .ci")
    everything = manifest(tmp_path / "a", {"lm": sha})
    failed = cli("fetch", "--manifest", everything, "--vendor", "cpu", "--mirror", mirror(mirrors))
    assert failed.code == 4
    assert f"commit {ci} of submodule .ci of component 'lm'" in failed.err
    selected = manifest(tmp_path / "b", {"lm": sha}, "[third_party/json, third_party/spdlog]")
    result = cli("fetch", "--manifest", selected, "--vendor", "cpu", "--mirror", mirror(mirrors))
    assert result.code == 0, result.err
    tree = Path(result.out.split()[-1])
    assert (tree / "third_party" / "json" / "json.hpp").is_file()
    assert not (tree / ".ci" / "ci.yml").exists()
    none = manifest(tmp_path / "c", {"lm": sha}, "none")
    result = cli("fetch", "--manifest", none, "--vendor", "cpu", "--mirror", mirror(mirrors))
    assert result.code == 0, result.err
    assert not (Path(result.out.split()[-1]) / "third_party" / "json" / "json.hpp").exists()


def test_submodule_changed_underneath_is_refused(
    tmp_path: Path,
    home: Path,
    mirrors: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = manifest(tmp_path / "s", {"lm": lm_sha(mirrors)})
    args = ("fetch", "--manifest", stack, "--vendor", "cpu", "--mirror", mirror(mirrors))
    tree = Path(cli(*args).out.split()[-1])
    git(tree / "third_party" / "json", "checkout", "-q", "HEAD~1")
    result = cli(*args)
    assert result.code == 4
    assert "changed underneath: modified third_party/json" in result.err


def test_empty_gitmodules_means_no_submodules(
    tmp_path: Path,
    home: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    # CUTLASS carries a .gitmodules that lists nothing.
    root = tmp_path / "mirrors"
    sha = init_repo(root / "cutlass.git", {**cmake_library("cutlass"), ".gitmodules": ""})
    stack = manifest(tmp_path / "s", {"cutlass": sha})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--mirror", mirror(root))
    assert result.code == 0, result.err
    assert (Path(result.out.split()[-1]) / "cutlass.c").is_file()
