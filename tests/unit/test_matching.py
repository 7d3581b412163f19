"""The audit's string tests that stand in for regular expressions (wheels.matching says why):
each answers as its expression does, on every string hypothesis makes of the characters that
matter to it, and ``re`` (with fnmatch, glob and json) stays out of a small wheel's audit."""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.wheelmaker import (
    EXT,
    LONELY_EXTENSION,
    TAG,
    Compiler,
    have_gcc,
    make_wheel,
    modules_of_an_audit,
)
from wheels import jsondata
from wheels.audit.archive import has_drive, header_lines, is_header_line, record_rows
from wheels.audit.cxx import is_grafted_runtime
from wheels.audit.ldso import path_tokens
from wheels.audit.musl import is_musl_self
from wheels.audit.requires import _extras_end, _name_end, _one_spec, _tokens
from wheels.cxxruntime import _RUNTIME, is_cxx, runtime_internals
from wheels.elf import ElfInfo
from wheels.fatbin import first_nonzero
from wheels.fatbin_tap import _MAGIC, _NEEDLE
from wheels.filename import is_normal, is_wheel_name
from wheels.matching import glob_names, lazy, star_match, starts_as, substitute_origin
from wheels.naming import bare_module, extension_parts
from wheels.policy.lddtree import is_libpython
from wheels.policy.python_api import PYTHON_API_FAMILIES, is_python_api
from wheels.policy.variants import is_name
from wheels.policy.wheel_abi import glibc_version, pep600

ROOT = Path(__file__).resolve().parents[2]
MANY = settings(max_examples=600, deadline=None)


def text(alphabet: str, size: int = 24) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, max_size=size)


def pieces(parts: list[str], size: int = 8) -> st.SearchStrategy[str]:
    """Strings joined from ``parts`` (words and single characters): the shapes that matter."""
    return st.lists(st.sampled_from(parts), max_size=size).map("".join)


@MANY
@given(name=text("ab*?.[]-x", 10), pattern=text("ab*?.-x", 8))
@example(name="libnccl.so.2", pattern="libnccl.so*")
@example(name="abab", pattern="*ab")
def test_star_match_is_fnmatchcase(name: str, pattern: str) -> None:
    assert star_match(name, pattern) == fnmatch.fnmatchcase(name, pattern)


def test_glob_names_is_glob(tmp_path: Path) -> None:
    for name in ("a.conf", "b.conf", ".hidden.conf", "c.txt", "ld-musl-x86_64.path"):
        (tmp_path / name).write_text("")
    for pattern in ("*.conf", ".*.conf", "ld-musl-*.path", "a.conf", "missing", "*", "?.conf"):
        full = f"{tmp_path}/{pattern}"
        assert sorted(glob_names(full)) == sorted(glob.glob(full)), pattern  # noqa: PTH207
    assert glob_names(f"{tmp_path}/none/*.conf") == []


@MANY
@given(pieces(["$ORIGIN", "${ORIGIN}", "$", "{", "}", "ORIGIN", "x", "_", "1", "/", "\\", "é"]))
def test_substitute_origin_is_re_sub_of_either_expression(entry: str) -> None:
    origin = "/o\\1"  # (taken literally; re.sub would read its backslash as an escape)
    literal = lambda _: origin  # noqa: E731
    assert substitute_origin(entry, origin) == re.sub(r"\$(ORIGIN|\{ORIGIN\})", literal, entry)
    expected = re.sub(r"\$(ORIGIN\b|\{ORIGIN\})", literal, entry)
    assert substitute_origin(entry, origin, bounded=True) == expected


def test_a_lazy_pattern_is_compiled_on_first_use_only() -> None:
    code = (
        "import os, sys; sys.path[:0] = sys.argv.pop(1).split(os.pathsep)\n"
        "from wheels.matching import lazy\n"
        "p = lazy(r'(?m)^a(\\d+)$'); b = lazy(rb'x+')\n"
        "before = 're' in sys.modules\n"
        "print(before, p.findall('a1\\nb\\na22'), b.sub(b'-', b'axxb'), p.pattern)\n"
    )
    paths = os.pathsep.join([str(ROOT), *sys.path])
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, paths], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False ['1', '22'] b'a-b' (?m)^a(\\d+)$"
    pattern = lazy(r"x")
    assert pattern.match("x") is not None
    assert pattern.match is pattern.__dict__["match"]  # (later calls go straight to re's)


@MANY
@given(pieces(["0", "1", "01", "10", ".", "+", "a", "z", "A", "-", "٣", "\n", "cpu", "cu130"]))
@example("1.0+cpu")
@example("1.0+")
def test_is_normal_is_the_normal_form_expression(version: str) -> None:
    segment, label = r"(?:0|[1-9][0-9]*)", r"(?:0|[1-9][0-9]*|[0-9]*[a-z][a-z0-9]*)"
    normal = rf"(?a){segment}(?:\.{segment})*(?:\+{label}(?:\.{label})*)?\Z"
    assert is_normal(version) == bool(re.match(normal, version))


@MANY
@given(text("aZ09._-é٣\n ", 8))
def test_is_wheel_name_is_packagings_expression(name: str) -> None:
    assert is_wheel_name(name) == bool(re.match(r"^[\w._]+\Z", name))


@MANY
@given(pieces(["_ssl", "x", "é", "1", ".", "cpython-311-x86_64-linux-gnu", "cpython-", "abi3",
               "pypy", "pypy310", "so", "/", "\n", "-"]))  # fmt: skip
@example("_ssl.cpython-311-x86_64-linux-gnu.so")
@example("x.abi3.so\n")
def test_extension_and_bare_module_names_are_their_expressions(name: str) -> None:
    m = re.match(r"^(?P<mod>[A-Za-z_]\w*)\.(cpython-[^./]+|abi3|pypy[^./]*)\.so$", name)
    assert extension_parts(name) == ((m.group(1), m.group(2)) if m else None)
    b = re.match(r"^(?P<mod>[A-Za-z_]\w*)\.so$", name)
    assert bare_module(name) == (b.group(1) if b else None)


@MANY
@given(text("aZ:/\\1é", 4))
def test_has_drive_is_its_expression(name: str) -> None:
    assert has_drive(name) == bool(re.match(r"^[A-Za-z]:", name))


@MANY
@given(pieces(["\r\n", "\r", "\n", "a", "From ", " ", "\t", ":", "K", "é", "\x7f"], 12))
def test_header_lines_and_fields_are_the_email_expressions(body: str) -> None:
    split = re.split(r"(\r\n|\r|\n)", body)
    joined = [
        split[i] + (split[i + 1] if i + 1 < len(split) else "") for i in range(0, len(split), 2)
    ]
    assert header_lines(body) == joined
    for line in joined:
        expected = bool(re.match(r"^(From |[\041-\071\073-\176]*:|[\t ])", line))
        assert is_header_line(line) == expected


@MANY
@given(pieces(["libstdc++-", "libc++-", "libc+-", "0123abcd", "abcdef01", "g", "9", ".so.", ".so"]))
@example("libstdc++-6b1a2c3d.so.6")
def test_is_grafted_runtime_is_its_expression(name: str) -> None:
    assert is_grafted_runtime(name) == bool(
        re.match(r"^lib(stdc\+\+|c\+\+)-[0-9a-f]{8}\.so\.", name)
    )


@MANY
@given(pieces(["_Z", "_ZGV", "b", "B", "N", "M", "Z", "2", "v_cos", "x"], 5))
def test_is_cxx_leaves_out_the_vector_function_abi(name: str) -> None:
    vector = name.startswith("_ZGV") and re.match(r"_ZGV[a-z][NM]", name)
    assert is_cxx(name) == (name.startswith("_Z") and not vector)


def info_with_exports(names: list[str]) -> ElfInfo:
    values: dict[str, object] = dict.fromkeys(f.name for f in fields(ElfInfo))
    values.update(export_names="\0".join(names), export_versions="\0" * len(names))
    return ElfInfo(**values)


RUNTIME_PARTS = ["_ZNSt6locale", "_ZNKSt5ctype", "_ZSt9terminatev", "_ZSt17__throw_", "__cxa_"]
RUNTIME_PARTS += ["__gxx_personality_v0", "_ZTVN10__cxxabiv", "Py", "_Py", "Init_x", "a", "\n"]


@MANY
@given(st.lists(pieces(RUNTIME_PARTS, 3), max_size=8))
def test_runtime_internals_and_python_exports_are_the_expressions_finds(names: list[str]) -> None:
    info = info_with_exports(names)
    assert runtime_internals(info) == tuple(sorted(set(info.exported_like(_RUNTIME))))
    python = re.compile(r"\0(_?Py[^\0]*)")
    assert sorted(info.exported_starting(("Py", "_Py"))) == sorted(info.exported_like(python))


@MANY
@given(pieces(["Py", "_Py", "Py_", "Object", "Imaging", "3", "_", "é", "Long"], 5))
def test_is_python_api_is_its_expression(symbol: str) -> None:
    m = re.match(r"^Py([A-Za-z]+)_", symbol)
    expected = symbol.startswith(("Py_", "_Py")) or (m is not None and m[1] in PYTHON_API_FAMILIES)
    assert is_python_api(symbol) == expected


@MANY
@given(pieces(["manylinux", "musllinux", "_", "2", "17", "٣", "x86_64", "\n", "a"], 8))
@example("manylinux_2_17_x86_64")
@example("musllinux_1_2_x86_64\n")
def test_pep600_is_its_expression(tag: str) -> None:
    m = re.match(r"^(manylinux|musllinux)_(\d+)_(\d+)_(.+)$", tag)
    expected = (m[1], (int(m[2]), int(m[3])), m[4]) if m else None
    if not tag.startswith(("manylinux1_", "manylinux2010_", "manylinux2014_")):
        assert pep600(tag) == expected


@MANY
@given(pieces(["GLIBC_", "GLIBCXX_", "2", "17", ".", "٣", "a", "_PRIVATE"], 6))
def test_glibc_version_is_its_expression(version: str) -> None:
    m = re.match(r"^GLIBC_(\d+)\.(\d+)", version)
    assert glibc_version(version) == ((int(m[1]), int(m[2])) if m else None)


@MANY
@given(text("az09_A-\n", 6))
def test_is_name_is_pep825s_expression(name: str) -> None:
    assert is_name(name) == bool(re.match(r"^[a-z0-9_]+$", name))


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


@MANY
@given(pieces(["libpython", "3", "11", ".", "m", "so", "x", "\n"], 8))
@example("libpython3.11.so.1.0")
def test_is_libpython_is_its_expression(soname: str) -> None:
    expected = bool(re.match(r"^libpython\d+\.\d+m?.so(\.\d)*$", soname))
    assert is_libpython(soname) == expected


_WS = r"[ \t]*"
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_SEP = r"[-_.]?"
_TAIL = (
    rf"(?:{_SEP}(?:alpha|beta|preview|pre|a|b|c|rc){_SEP}[0-9]*)?"
    rf"(?:-[0-9]+|{_SEP}(?:post|rev|r){_SEP}[0-9]*)?"
    rf"(?:{_SEP}dev{_SEP}[0-9]*)?"
)
_SPEC = (
    rf"(?:(?:==|!=){_WS}(?:{_RELEASE}{_TAIL}|{_RELEASE}\.\*)"
    rf"|(?:<=|>=|<|>){_WS}{_RELEASE}{_TAIL}"
    rf"|~={_WS}[0-9]+(?:\.[0-9]+)+{_TAIL})"
)
_FRONT = re.compile(
    rf"{_WS}(?P<name>{_NAME}){_WS}(?:\[{_WS}{_NAME}(?:{_WS},{_WS}{_NAME})*{_WS}\])?"
    r"(?P<specs>[^;]*)"
)
_TOKEN = re.compile(
    r"""[ \t]+|(?P<open>\()|(?P<close>\))|(?P<quoted>"[^"]*"|'[^']*')"""
    r"|(?P<op>===|==|~=|!=|<=|>=|<|>)|(?P<word>[A-Za-z0-9_.]+)"
)
SPEC_PARTS = ["==", "!=", "<=", ">=", "<", ">", "~=", "=", " ", "1", "0", ".", "*", "-", "_"]
SPEC_PARTS += ["a", "b", "c", "rc", "alpha", "pre", "preview", "post", "rev", "r", "dev", "x"]


@settings(max_examples=3000, deadline=None)
@given(pieces(SPEC_PARTS, 9))
@example(">=2.0.0b")
@example("~=1.0-preview.3")
@example("==1.*")
def test_one_specifier_is_the_specifier_expression(spec: str) -> None:
    assert _one_spec(spec) == bool(re.fullmatch(rf"{_WS}{_SPEC}{_WS}", spec))


@MANY
@given(pieces(["a", "Z", "9", ".", "-", "_", " ", "\t", "[", "]", ",", "x", ">=1", "("], 10))
@example("pytest[testing] ~=8.0")
@example("foo[bar, baz]==1.*")
def test_a_lines_name_and_extras_are_the_front_expression(front: str) -> None:
    m = _FRONT.fullmatch(front)
    start = len(front) - len(front.lstrip(" \t"))
    end = _name_end(front, start)
    assert (m is not None) == (end > start)
    if m is not None:
        assert front[start:end] == m["name"]
        rest = front[end:]
        assert front[_extras_end(front, end + len(rest) - len(rest.lstrip(" \t"))) :] == m["specs"]


@MANY
@given(pieces(["(", ")", '"x"', "'y'", '"', "==", "===", "=", "<", "~=", "!", " ", "and", "a.b"]))
def test_marker_tokens_are_the_token_expressions(marker: str) -> None:
    expected: list[str] | None = []
    at = 0
    while at < len(marker):
        token = _TOKEN.match(marker, at)
        if token is None:
            expected = None
            break
        at = token.end()
        if token.lastgroup is not None:
            kind = token.lastgroup
            expected.append(f"word:{token.group()}" if kind == "word" else kind)
    assert _tokens(marker) == expected


@MANY
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
))  # fmt: skip
def test_json_data_is_read_as_json_reads_it(value: object) -> None:
    text = json.dumps(value)
    assert jsondata.loads(f" \n{text}\t ") == json.loads(text)


@pytest.mark.parametrize("bad", ["", "{", "[1,]", "1 2", "\ufeff{}", "{'a': 1}", "NaNx"])
def test_json_data_that_is_not_json_raises_jsons_error(bad: str) -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        jsondata.loads(bad)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(bad)
    assert str(raised.value) == str(expected.value)


def test_the_policy_files_read_as_json_reads_them() -> None:
    import auditwheel

    policies = Path(auditwheel.__file__).parent / "policy"
    files = [*policies.glob("*-policy.json"), ROOT / "wheels" / "policy" / "vendors.json"]
    assert len(files) >= 3
    for path in files:
        assert jsondata.load_file(str(path)) == json.loads(path.read_text(encoding="utf-8"))
    assert jsondata.loads("[NaN, Infinity, -Infinity]")[1:] == [float("inf"), float("-inf")]


@pytest.mark.parametrize("options", [(), ("--json",)], ids=["text", "json"])
def test_a_small_wheels_audit_imports_no_re_fnmatch_glob_csv_or_json(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """An extension module that needs libm, with a RUNPATH of $ORIGIN, in a wheel with
    Requires-Dist lines of the common form: its audit (as the launcher starts it, without
    ``site``), its report as text or as JSON, imports none of them, nor enum (which re
    imports), nor importlib.util."""
    if not have_gcc():
        pytest.skip("needs gcc")
    ext = Compiler(tmp_path / "build").shared(
        f"_small{EXT}",
        LONELY_EXTENSION.format(mod="_small"),
        flags=["-lm", "-Wl,-rpath,$ORIGIN/../small.libs", "-Wl,--enable-new-dtags"],
    )
    wheel = make_wheel(
        tmp_path,
        {"small/__init__.py": b"", f"small/_small{EXT}": ext},
        name="small",
        version="1.0",  # (a local version, +cpu, is matched by the vendors' patterns)
        tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64",
        requires=["numpy>=1.23", "cffi >=1.12 ; platform_python_implementation != 'PyPy'"],
    )
    _, modules = modules_of_an_audit(wheel, tmp_path, *options)
    assert "wheels.audit.requires" in modules  # (its lines were read)
    assert not {"re", "enum", "fnmatch", "glob", "csv", "json", "importlib.util"} & set(modules), {
        "re",
        "enum",
        "fnmatch",
        "glob",
        "csv",
        "json",
        "importlib.util",
    } & set(modules)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=2).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@MANY
@given(JSON_VALUES)
@example({"a": [], "b": {}, "c": [1.5, float("nan"), float("-inf")], "é": "\x00\u2028😀"})
def test_json_is_written_as_json_writes_it_indented(value: object) -> None:
    assert jsondata.dumps(value) == json.dumps(value, indent=2)


def test_what_json_alone_writes_or_refuses_goes_to_it() -> None:
    assert jsondata.dumps({1: [2]}) == json.dumps({1: [2]}, indent=2)
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        jsondata.dumps(cycle)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsondata.dumps({"a": object()})


@MANY
@given(st.binary(max_size=3000).map(lambda b: b.replace(b"\x01", b"\x00")), st.integers(0, 3100))
@example(b"\x00" * 2000 + b"\x07", 3)
def test_first_nonzero_is_the_search_for_a_byte_not_zero(data: bytes, at: int) -> None:
    found = re.compile(rb"[^\x00]").search(data, at)
    assert first_nonzero(data, at) == (found.start() if found else -1)


def test_the_fat_binary_magic_pattern_finds_its_needle_as_the_needle_escaped_does() -> None:
    data = b"x.*" + _NEEDLE + b"y" + _NEEDLE + _NEEDLE[:-1] + b"\\" + _NEEDLE
    escaped = re.compile(re.escape(_NEEDLE))
    found = [m.start() for m in _MAGIC.finditer(data)]
    assert found == [m.start() for m in escaped.finditer(data)] == [3, 10, 22]


_LOCAL_PATTERNS = ["^cpu", "^(cu\\d+|cuda)", "^musa", "^ppu", "^", "^a-b_c", "cpu", "^cp.", "^é"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_LOCAL_PATTERNS),
    st.text(alphabet="cpuamsd0123456789.-_é", max_size=8),
)
@example("^cpu", "cpu")
@example("^cpu", "cp")
@example("^(cu\\d+|cuda)", "cu130")
def test_starts_as_answers_as_the_compiled_pattern_matches(pattern: str, text: str) -> None:
    """A vendor's local version pattern (``^cpu``) is a prefix test; any other is matched."""
    assert starts_as(lazy(pattern), text) == (re.match(pattern, text) is not None)
    assert starts_as(re.compile(pattern), text) == (re.match(pattern, text) is not None)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='ab,"\n\r \t\0é=', max_size=40))
@example("a,b,c\n\nd,e\n")
@example('a,"b,c",d\n')
@example('a,"b\n')
def test_record_rows_are_the_rows_csv_reads(text: str) -> None:
    """RECORD is split at commas without csv where that is what csv's reader would read."""
    import csv

    try:
        expected: list[list[str]] | str = list(csv.reader(text.splitlines()))
    except csv.Error:
        expected = "error"
    try:
        found: list[list[str]] | str = record_rows(text)
    except ValueError:
        found = "error"
    assert found == expected
