"""`lock COMPONENT=REF [--vendor V]` resolves a branch or tag and rewrites only that pin, keeping
the manifest's comments and layout; `lock --check` reports pins no longer reachable."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from builder.sources.lock import set_pin
from tests.gitrepos import PUBLIC, cmake_library, commit, git, init_repo, mirror

OLD = "0" * 40
NEW = "f" * 40

MANIFEST = """\
# The stack: comments stay where they are.
vendors:
  cpu: {{}}   # the host
  nvidia: {{}}
components:
  foo:
    git: PUBLIC/foo.git
    # pinned by hand
    rev: {foo}   # trailing comment
  bar:
    git: PUBLIC/bar.git
    rev: {bar}
    vendors:
      nvidia:
        rev: {bar}
      # a comment after the last vendor
  # a comment before baz
  baz: {{path: baz}}
""".replace("PUBLIC", PUBLIC)


def write_manifest(root: Path, foo: str, bar: str) -> Path:
    (root / "components").mkdir(parents=True, exist_ok=True)
    (root / "baz").mkdir(exist_ok=True)
    for name in ("foo", "bar", "baz"):
        (root / "components" / f"{name}.yaml").write_text("vendors:\n  cpu: {}\n  nvidia: {}\n")
    path = root / "stack.yaml"
    path.write_text(MANIFEST.format(foo=foo, bar=bar))
    return path


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


# --- the text edit (pure) -----------------------------------------------------------------------


def test_rewrites_only_the_rev_value_keeping_comments() -> None:
    before = MANIFEST.format(foo=OLD, bar=OLD)
    after = set_pin(before, "foo", NEW)
    assert changed_lines(before, after) == [
        f"-    rev: {OLD}   # trailing comment",
        f"+    rev: {NEW}   # trailing comment",
    ]


def test_rewrites_a_vendor_override_in_place() -> None:
    before = MANIFEST.format(foo=OLD, bar=OLD)
    after = set_pin(before, "bar", NEW, "nvidia")
    assert changed_lines(before, after) == [f"-        rev: {OLD}", f"+        rev: {NEW}"]
    assert after.count(NEW) == 1  # the default pin of bar is untouched


def test_adds_a_vendor_override_after_the_last_vendor_before_following_comments() -> None:
    before = MANIFEST.format(foo=OLD, bar=OLD)
    after = set_pin(before, "bar", NEW, "cpu")
    assert changed_lines(before, after) == ["+      cpu:", f"+        rev: {NEW}"]
    lines = after.splitlines()
    assert lines.index("      cpu:") == lines.index(f"        rev: {OLD}") + 1


def test_adds_a_vendors_block_when_the_component_has_none() -> None:
    before = MANIFEST.format(foo=OLD, bar=OLD)
    after = set_pin(before, "foo", NEW, "nvidia")
    assert changed_lines(before, after) == [
        "+    vendors:",
        "+      nvidia:",
        f"+        rev: {NEW}",
    ]
    assert "# pinned by hand" in after


def test_vendor_aliases_find_the_canonical_entry() -> None:
    text = "components:\n  foo:\n    git: u\n    rev: a\n    vendors:\n      ali:\n        rev: b\n"
    assert set_pin(text, "foo", NEW, "thead").endswith(f"      ali:\n        rev: {NEW}\n")


def test_inline_vendor_mapping_gets_the_rev_inside_its_braces() -> None:
    text = (
        "components:\n  foo:\n    git: u\n    rev: a\n    vendors:\n      cpu: {options: {X: ON}}\n"
    )
    assert f"cpu: {{rev: {NEW}, options: {{X: ON}}}}" in set_pin(text, "foo", NEW, "cpu")


def test_path_sources_have_nothing_to_lock() -> None:
    from builder.core.errors import UsageError

    with pytest.raises(UsageError, match="path source"):
        set_pin(MANIFEST.format(foo=OLD, bar=OLD), "baz", NEW)


# --- resolving through git, through mirrors --------------------------------------------------


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "mirrors"
    first = init_repo(root / "foo.git", cmake_library("foo"))
    git(root / "foo.git", "tag", "-a", "v1", "-m", "release 1")
    second = commit(root / "foo.git", {"foo.c": "int answer(void) { return 2; }\n"}, "second")
    git(root / "foo.git", "branch", "stable", first)
    bar = init_repo(root / "bar.git", cmake_library("bar"))
    return {"first": first, "second": second, "bar": bar}


@pytest.mark.integration
def test_lock_branch_resolves_through_mirror_and_rewrites_one_line(
    tmp_path: Path,
    home: Path,
    repos: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = write_manifest(tmp_path / "s", repos["first"], repos["bar"])
    before = stack.read_text()
    result = cli("lock", "foo=main", "--manifest", stack, "--mirror", mirror(tmp_path / "mirrors"))
    assert result.code == 0, result.err
    assert f"foo: main -> {repos['second']}" in result.out
    assert changed_lines(before, stack.read_text()) == [
        f"-    rev: {repos['first']}   # trailing comment",
        f"+    rev: {repos['second']}   # trailing comment",
    ]
    assert cli("validate", "--manifest", stack).code == 0


@pytest.mark.integration
def test_lock_annotated_tag_pins_the_commit_not_the_tag_object(
    tmp_path: Path,
    home: Path,
    repos: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = write_manifest(tmp_path / "s", repos["second"], repos["bar"])
    result = cli(
        "lock",
        "foo=v1",
        "--vendor",
        "nvidia",
        "--manifest",
        stack,
        "--mirror",
        mirror(tmp_path / "mirrors"),
    )
    assert result.code == 0, result.err
    text = stack.read_text()
    assert f"      nvidia:\n        rev: {repos['first']}\n" in text
    assert f"    rev: {repos['second']}   # trailing comment" in text


@pytest.mark.integration
def test_unknown_ref_is_an_error_with_a_suggestion_and_exit_4(
    tmp_path: Path,
    home: Path,
    repos: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = write_manifest(tmp_path / "s", repos["first"], repos["bar"])
    before = stack.read_text()
    result = cli(
        "lock", "foo=stabel", "--manifest", stack, "--mirror", mirror(tmp_path / "mirrors")
    )
    assert result.code == 4
    assert "'stabel' is neither a branch nor a tag" in result.err
    assert "did you mean 'stable'" in result.err
    assert stack.read_text() == before


@pytest.mark.integration
def test_unreachable_repository_is_an_error_with_exit_4(
    tmp_path: Path,
    home: Path,
    repos: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stack = write_manifest(tmp_path / "s", repos["first"], repos["bar"])
    result = cli("lock", "foo=main", "--manifest", stack, "--mirror", mirror(tmp_path / "nowhere"))
    assert result.code == 4
    assert "cannot list the refs of" in result.err


@pytest.mark.integration
def test_check_passes_for_reachable_pins_and_reports_a_force_pushed_one(
    tmp_path: Path,
    home: Path,
    repos: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    mirrors = mirror(tmp_path / "mirrors")
    stack = write_manifest(tmp_path / "s", repos["first"], repos["bar"])
    ok = cli("lock", "--check", "--manifest", stack, "--mirror", mirrors)
    assert ok.code == 0, ok.err
    assert re.search(rf"^ok +foo +{repos['first'][:12]} ", ok.out, re.M)
    # A pin that only a rewritten branch held: gone from every branch and tag.
    foo = tmp_path / "mirrors" / "foo.git"
    doomed = commit(foo, {"foo.c": "int answer(void) { return 3; }\n"}, "doomed")
    stack = write_manifest(tmp_path / "s", doomed, repos["bar"])
    assert cli("lock", "--check", "--manifest", stack, "--mirror", mirrors).code == 0
    git(foo, "reset", "-q", "--hard", repos["second"])
    bad = cli("lock", "--check", "--manifest", stack, "--mirror", mirrors)
    assert bad.code == 4
    assert re.search(rf"^BAD +foo +{doomed[:12]} ", bad.out, re.M)
    assert "1 of 3 pins are not reachable: foo" in bad.err
