"""Names and symbols read by string tests rather than regular expressions where that is the
plainer code: each answers as its expression does, on every string hypothesis makes of the
characters that matter to it. And the name patterns, on the names that matter."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wheels.audit.archive import has_drive
from wheels.audit.ldso import path_tokens
from wheels.audit.musl import is_musl_self
from wheels.cuda.fatbin import first_nonzero
from wheels.cuda.tap import _MAGIC, _NEEDLE
from wheels.cxxruntime import is_cxx
from wheels.elf import ElfInfo
from wheels.naming import bare_module, extension_parts
from wheels.policy.wheel_abi import pep600

MANY = settings(max_examples=600, deadline=None)


def text(alphabet: str, size: int = 24) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, max_size=size)


def pieces(parts: list[str], size: int = 8) -> st.SearchStrategy[str]:
    """Strings joined from ``parts`` (words and single characters): the shapes that matter."""
    return st.lists(st.sampled_from(parts), max_size=size).map("".join)


@pytest.mark.parametrize(
    ("name", "parts", "bare"),
    [
        ("_ssl.cpython-311-x86_64-linux-gnu.so", ("_ssl", "cpython-311-x86_64-linux-gnu"), None),
        ("x.abi3.so", ("x", "abi3"), None),
        ("x.pypy310-pp73-x86_64-linux-gnu.so", ("x", "pypy310-pp73-x86_64-linux-gnu"), None),
        ("_x.so", None, "_x"),
        ("1x.abi3.so", None, None),
        ("libfoo.so.1", None, None),
    ],
)
def test_extension_and_bare_module_names(
    name: str, parts: tuple[str, str] | None, bare: str | None
) -> None:
    assert extension_parts(name) == parts
    assert bare_module(name) == bare


@pytest.mark.parametrize(
    ("tag", "parsed"),
    [
        ("manylinux_2_17_x86_64", ("manylinux", (2, 17), "x86_64")),
        ("manylinux2014_aarch64", ("manylinux", (2, 17), "aarch64")),
        ("musllinux_1_2_x86_64", ("musllinux", (1, 2), "x86_64")),
        ("linux_x86_64", None),
    ],
)
def test_pep600_tags(tag: str, parsed: object) -> None:
    assert pep600(tag) == parsed


@MANY
@given(text("aZ:/\\1é", 4))
def test_has_drive_is_its_expression(name: str) -> None:
    assert has_drive(name) == bool(re.match(r"^[A-Za-z]:", name))


@MANY
@given(pieces(["_Z", "_ZGV", "b", "B", "N", "M", "Z", "2", "v_cos", "x"], 5))
def test_is_cxx_leaves_out_the_vector_function_abi(name: str) -> None:
    vector = name.startswith("_ZGV") and re.match(r"_ZGV[a-z][NM]", name)
    assert is_cxx(name) == (name.startswith("_Z") and not vector)


def info_with_exports(names: list[str]) -> ElfInfo:
    values: dict[str, object] = dict.fromkeys(f.name for f in fields(ElfInfo))
    values.update(export_names="\0".join(names), export_versions="\0" * len(names))
    return ElfInfo(**values)


EXPORT_PARTS = ["Py", "_Py", "Init_x", "a", "_Z", "\n"]


@MANY
@given(st.lists(pieces(EXPORT_PARTS, 3), max_size=8))
def test_python_exports_are_what_the_expression_finds(names: list[str]) -> None:
    info = info_with_exports(names)
    python = re.compile(r"\0(_?Py[^\0]*)")
    assert sorted(info.exported_starting(("Py", "_Py"))) == sorted(info.exported_like(python))


@MANY
@given(pieces(["$", "{", "}", "ORIGIN", "LIB", "_", "1", "/", "é"], 8))
def test_path_tokens_are_what_findall_finds(entry: str) -> None:
    found = [t.strip("{}") for t in re.findall(r"\$(\{[A-Za-z_]+\}|[A-Za-z_]+)", entry)]
    assert path_tokens(entry) == found


@MANY
@given(pieces(["lib", "c", "m", "pthread", "xnet", ".", "ld-musl-", "so", "x"], 4))
def test_is_musl_self_is_its_expression(soname: str) -> None:
    expected = bool(re.match(r"^(lib(c|pthread|rt|m|dl|util|xnet)\.|ld-musl-)", soname))
    assert is_musl_self(soname) == expected


def test_first_nonzero_finds_the_end_of_padding() -> None:
    assert first_nonzero(b"\x00" * 2000 + b"\x07", 3) == 2000
    assert first_nonzero(b"\x01\x00\x00", 1) == -1
    assert first_nonzero(b"", 0) == -1


def test_the_fat_binary_magic_pattern_finds_its_needle() -> None:
    data = b"x.*" + _NEEDLE + b"y" + _NEEDLE + _NEEDLE[:-1] + b"\\" + _NEEDLE
    assert [m.start() for m in _MAGIC.finditer(data)] == [3, 10, 22]
