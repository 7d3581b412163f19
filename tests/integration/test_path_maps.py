"""Builds keep this machine's paths out of the binaries (-ffile-prefix-map): ``__FILE__`` names
``/infini-stack/src/<component>/...``, so a store entry is relocatable and reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepos import cmake_library, init_repo, stack_for

pytestmark = pytest.mark.integration


def test_file_names_compiled_into_a_library_name_no_path_of_this_machine(
    tmp_path: Path, home: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    body = "const char *where(void) { return __FILE__; }\n"
    repo = tmp_path / "libfoo"
    sha = init_repo(repo, cmake_library("foo", body))
    stack = stack_for(tmp_path / "s", {"foo": (str(repo), sha)})
    result = cli("build", "--manifest", stack, "--vendor", "cpu", "--launcher", "none")
    assert result.code == 0, result.err
    (library,) = (home / "store").glob("*/prefix/lib/libfoo.so")
    data = library.read_bytes()
    assert b"/infini-stack/src/foo/foo.c" in data
    assert str(home).encode() not in data and str(tmp_path).encode() not in data


# pybind11 (3.1) strips a module by a POST_BUILD command without VERBATIM, which escapes only the
# spaces of its path for the shell, and the compiler splits -Wl,-rpath,... at commas: the mini
# stack builds at a path with spaces, and a plain library (below) at one with any shell-special
# character.
SPACES = "a long directory with spaces"
ODD = "odd dir $HOME 'q' (1) & x, y"


def test_the_mini_stack_builds_and_wheels_at_a_path_with_spaces_and_shell_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from tests.conftest import MINI

    where = tmp_path / SPACES
    home = where / "home dir"
    monkeypatch.setenv("INFINI_STACK_HOME", str(home))
    monkeypatch.delenv("INFINI_STACK_STORE", raising=False)
    stack = where / "mini stack"
    shutil.copytree(MINI, stack)
    out = where / "wheel out"
    result = cli(
        "wheel", "--manifest", stack / "stack.yaml", "--vendor", "cpu", "--launcher", "none",
        "--out", out,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert list(out.glob("*.whl"))
    libraries = list((home / "store").glob("*/prefix/lib/lib*.so"))
    assert libraries
    for library in libraries:  # the maps held: no path of the odd directory in any binary
        assert str(where).encode() not in library.read_bytes(), library


def test_a_library_builds_with_its_paths_mapped_at_a_path_with_shell_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:  # type: ignore[no-untyped-def]
    where = tmp_path / ODD
    home = where / "home dir"
    monkeypatch.setenv("INFINI_STACK_HOME", str(home))
    monkeypatch.delenv("INFINI_STACK_STORE", raising=False)
    body = "const char *where(void) { return __FILE__; }\n"
    repo = where / "lib foo"
    sha = init_repo(repo, cmake_library("foo", body))
    stack = stack_for(where / "s", {"foo": (str(repo), sha)})
    result = cli("build", "--manifest", stack, "--vendor", "cpu", "--launcher", "none")
    assert result.code == 0, result.err
    (library,) = (home / "store").glob("*/prefix/lib/libfoo.so")
    data = library.read_bytes()
    assert b"/infini-stack/src/foo/foo.c" in data
    assert str(where).encode() not in data
