"""Fetching pinned sources from real local git repositories: pins, wrong SHAs, moved branches,
mirrors, trees that changed underneath (submodules: test_submodules.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.gitrepos import PUBLIC, cmake_library, commit, git, init_repo, mirror, stack_for

pytestmark = pytest.mark.integration


def test_fetch_checks_out_the_pinned_sha_into_a_per_build_tree(
    tmp_path: Path, home: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    first = init_repo(repo, cmake_library("foo"))
    commit(repo, {"foo.c": "int answer(void) { return 43; }\n"}, "second")
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), first)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 0, result.err
    tree = Path(result.out.split()[-1])
    assert tree.is_relative_to(home / "src")
    assert git(tree, "rev-parse", "HEAD") == first
    assert "return 42" in (tree / "foo.c").read_text()
    assert (home / "git").is_dir()  # the shared cache is bare: no work tree in it
    (cache,) = (home / "git").iterdir()
    assert not (cache / "foo.c").exists()


def test_wrong_sha_names_component_url_and_sha_and_exits_4(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    init_repo(repo, cmake_library("foo"))
    missing = "0123456789abcdef0123456789abcdef01234567"
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), missing)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert f"commit {missing} of component 'foo' is not in {repo}" in result.err
    assert "Traceback" not in result.err


def test_unreachable_url_names_component_and_exits_4(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    stack = stack_for(tmp_path / "s", {"foo": (str(tmp_path / "nowhere"), "a" * 40)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert "cannot fetch component 'foo'" in result.err
    assert "--mirror" in result.err


def test_pin_behind_a_moved_branch_is_still_fetched(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    first = init_repo(repo, cmake_library("foo"))
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), first)})
    assert cli("fetch", "--manifest", stack, "--vendor", "cpu").code == 0
    second = commit(repo, {"foo.c": "int answer(void) { return 1; }\n"}, "moved")
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), second)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert git(Path(result.out.split()[-1]), "rev-parse", "HEAD") == second


def test_pin_dropped_by_a_force_pushed_branch_is_a_clear_error(
    tmp_path: Path, home: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    init_repo(repo, cmake_library("foo"))
    doomed = commit(repo, {"foo.c": "int answer(void) { return 7; }\n"}, "doomed")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), doomed)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert f"commit {doomed} of component 'foo'" in result.err


def test_mirror_rewrites_the_url_prefix(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    mirrors = tmp_path / "mirrors"
    sha = init_repo(mirrors / "foo.git", cmake_library("foo"))
    stack = stack_for(tmp_path / "s", {"foo": (f"{PUBLIC}/foo.git", sha)})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--mirror", mirror(mirrors))
    assert result.code == 0, result.err
    assert git(Path(result.out.split()[-1]), "rev-parse", "HEAD") == sha


def test_tree_changed_underneath_is_refused(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    sha = init_repo(repo, cmake_library("foo"))
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), sha)})
    tree = Path(cli("fetch", "--manifest", stack, "--vendor", "cpu").out.split()[-1])
    (tree / "foo.c").write_text("int answer(void) { return 0; }\n")
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert "changed underneath: modified foo.c" in result.err
    git(tree, "checkout", "-q", "foo.c")
    commit(tree, {"foo.c": "int answer(void) { return 5; }\n"}, "local commit")
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert f"the pin is {sha}" in result.err


def test_checkout_from_a_cache_that_lacks_a_blob_names_the_cache_not_a_change_underneath(
    tmp_path: Path, home: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    """git checks out around a missing object and exits 0 (a mirror that left out its largest
    files does this): the tree is then short of a file from the start."""
    repo = tmp_path / "libfoo"
    sha = init_repo(repo, cmake_library("foo"))
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), sha)})
    tree = Path(cli("fetch", "--manifest", stack, "--vendor", "cpu").out.split()[-1])
    (cache,) = (home / "git").iterdir()
    blob = git(cache, "rev-parse", f"{sha}:foo.c")
    loose = cache / "objects" / blob[:2] / blob[2:]
    assert loose.is_file(), "a small fetch keeps its objects loose"
    loose.unlink()
    shutil.rmtree(tree)
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu")
    assert result.code == 4
    assert f"the checkout of component 'foo' at {sha} is incomplete (missing foo.c)" in result.err
    assert f"the git cache {cache} lacks objects" in result.err
    assert f"hint: remove {cache}" in result.err
    assert not tree.exists() and "Traceback" not in result.err


def test_build_from_git_pins_then_second_build_is_all_hits(tmp_path: Path, home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "libfoo"
    sha = init_repo(repo, cmake_library("foo"))
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), sha)})
    first = cli("build", "--manifest", stack, "--vendor", "cpu")
    assert first.code == 0, first.err
    assert "1 built" in first.err
    second = cli("build", "--manifest", stack, "--vendor", "cpu")
    assert second.code == 0
    assert "0 built, 1 from the store" in second.err
    assert "[foo]" not in second.err  # no step ran
