"""Source identities, mirror rewriting and the state layout, without git."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.digest import tree_digest
from builder.core.errors import SourceError
from builder.core.layout import Layout, default_home
from builder.sources.fetch import parse_mirrors, rewrite


def test_tree_digest_changes_with_content_names_and_exec_bits(tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text("int a;\n")
    first = tree_digest(tmp_path)
    assert tree_digest(tmp_path) == first
    (tmp_path / "a.c").write_text("int b;\n")
    second = tree_digest(tmp_path)
    assert second != first
    (tmp_path / "a.c").chmod(0o755)
    assert tree_digest(tmp_path) != second
    (tmp_path / "a.c").chmod(0o644)
    (tmp_path / "a.c").rename(tmp_path / "b.c")
    assert tree_digest(tmp_path) != second


def test_tree_digest_ignores_git_metadata_and_bytecode(tmp_path: Path) -> None:
    (tmp_path / "a.c").write_text("int a;\n")
    first = tree_digest(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"x")
    assert tree_digest(tmp_path) == first


def test_tree_digest_is_independent_of_where_the_tree_lives(tmp_path: Path) -> None:
    for where in ("one", "two"):
        (tmp_path / where / "src").mkdir(parents=True)
        (tmp_path / where / "src" / "x.c").write_text("int x;\n")
    assert tree_digest(tmp_path / "one") == tree_digest(tmp_path / "two")


def test_rewrite_uses_the_longest_matching_prefix() -> None:
    mirrors = {"https://github.com/": "/m/all/", "https://github.com/InfiniTensor/": "/m/it/"}
    assert rewrite("https://github.com/InfiniTensor/InfiniRT.git", mirrors) == "/m/it/InfiniRT.git"
    assert rewrite("https://github.com/gabime/spdlog.git", mirrors) == "/m/all/gabime/spdlog.git"
    assert rewrite("https://gitlab.com/x.git", mirrors) == "https://gitlab.com/x.git"


def test_parse_mirrors_keeps_trailing_slashes_and_rejects_malformed(tmp_path: Path) -> None:
    parsed = parse_mirrors([f"https://h/org/={tmp_path}/", "https://h/x.git=https://m/x.git"])
    assert parsed["https://h/org/"] == f"{tmp_path.resolve()}/"
    assert parsed["https://h/x.git"] == "https://m/x.git"
    with pytest.raises(SourceError, match="URL=DIR"):
        parse_mirrors(["no-equals-sign"])


def test_home_defaults_to_xdg_cache_and_honours_the_env_var() -> None:
    assert default_home({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/infini-stack")
    assert default_home({"HOME": "/h"}) == Path("/h/.cache/infini-stack")
    assert default_home({"INFINI_STACK_HOME": "/s", "XDG_CACHE_HOME": "/c"}) == Path("/s")


def test_layout_store_can_be_moved_by_env_or_flag(tmp_path: Path) -> None:
    env = {"INFINI_STACK_HOME": str(tmp_path / "h"), "INFINI_STACK_STORE": str(tmp_path / "s")}
    layout = Layout.from_env(env)
    assert layout.store_root == (tmp_path / "s").resolve()
    assert layout.entry("ab" * 32).parent == layout.store_root
    flag = Layout.from_env(env, store=tmp_path / "f")
    assert flag.store_root == (tmp_path / "f").resolve()
    assert layout.staging("ab" * 32).parent == layout.incoming()
