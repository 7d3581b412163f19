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
