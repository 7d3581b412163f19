"""Requires-Dist lines (wheels.audit.requires): read without packaging when they are of the
common form, and always with packaging's verdict and packaging's name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement

from wheels.audit.requires import InvalidRequires, _simple_name, read_requires

ROOT = Path(__file__).resolve().parents[2]

# Lines as popular wheels write them (cryptography, aiohttp, psutil, SQLAlchemy, protobuf, ...).
REAL_LINES = [
    "cffi >=1.12 ; platform_python_implementation != 'PyPy'",
    "bcrypt >=3.1.5 ; extra == 'ssh'",
    "numpy>=1.23",
    "numpy (>=1.0)",
    "torch ; extra == 'gpu'",
    "python-dateutil>=2.7",
    'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux" and platform_machine == '
    '"x86_64"',
    'aiodns>=3.2.0; (sys_platform == "linux" or sys_platform == "darwin") and extra == "speedups"',
    'greenlet !=0.4.17 ; python_version < "3.13" and (platform_machine == "aarch64" or '
    '(platform_machine == "ppc64le" or platform_machine == "x86_64"))',
    "protobuf <6.0dev,>=5.26.1",
    "typing-extensions ; (python_version < \"3.10\") and extra == 'typing'",
    "pytest[testing] ~=8.0.0rc1 ; extra == 'test'",
    "foo[bar, baz]==1.*",
    'cffi>=2.0.0b; (platform_python_implementation != "PyPy" and python_version >= "3.14") and '
    'extra == "cffi"',
    "tensorflow<2.19-1,>=2.18.0.post; extra == 'tf'",
    "foo>=1.0.dev,<2.0_rc_1,!=1.5.r2,~=1.0-preview.3",
]


@pytest.mark.parametrize("line", REAL_LINES)
def test_common_lines_are_read_as_packaging_reads_their_names(line: str) -> None:
    assert _simple_name(line) == Requirement(line).name
    assert read_requires(line).name == Requirement(line).name


_TAILS = ["", "a", "b", "c", "rc", "alpha", "beta", "pre", "preview", "post", "rev", "r", "dev"]
_JOINS = ["", ".", "-", "_", "--", "._"]
_SPELLINGS = sorted(
    {f"1.0{j}{t}{k}{n}" for t in _TAILS for j in _JOINS for k in ("", ".", "_") for n in ("", "1")}
    | {f"1.0{a}{b}" for a in ("b", "-1", ".post", "rc1", "") for b in ("", ".dev", "-2", "a1", "x")}
)


@pytest.mark.parametrize("op", ["==", "!=", ">=", "<=", "<", ">", "~="])
def test_every_spelling_of_a_release_tail_is_read_without_packaging_only_if_it_accepts(
    op: str,
) -> None:
    read = 0
    for version in _SPELLINGS:
        line = f"foo{op}{version}"
        try:
            accepted = Requirement(line).name == "foo"
        except InvalidRequirement:
            accepted = False
        if _simple_name(line) is not None:
            assert accepted, line
            read += 1
    assert read > 100  # (the pre, post and dev releases of PEP 440, every separator)


def test_common_lines_are_read_without_importing_packaging() -> None:
    code = (
        "import sys; from wheels.audit.requires import read_requires\n"
        f"for line in {REAL_LINES!r}: read_requires(line)\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    heavy = {"packaging.requirements", "packaging.markers", "packaging.specifiers"}
    assert not heavy & set(out.split())  # (packaging.version, a file name's, may be there)


@pytest.mark.parametrize(
    "line",
    ["foo-", "foo>=1 2", "foo ; ", "foo ; extra ==", "foo>=1.0.*", "foo~=1", "foo ; (extra == 'x'"],
)
def test_a_line_packaging_rejects_is_invalid_with_its_message(line: str) -> None:
    with pytest.raises(InvalidRequirement) as theirs:
        Requirement(line)
    with pytest.raises(InvalidRequires) as ours:
        read_requires(line)
    assert str(ours.value) == str(theirs.value)


def test_a_line_of_another_form_is_read_by_packaging() -> None:
    line = "foo @ https://example.com/foo-1.0.tar.gz ; os.name == 'posix'"
    assert _simple_name(line) is None
    req = read_requires(line)
    assert (req.name, req.text) == ("foo", line)
    assert req.parsed().url == "https://example.com/foo-1.0.tar.gz"


# Pieces of a line, each (valid, invalid): a line is drawn from valid pieces, with at most one
# of them swapped for an invalid one, so that every rule's both sides are drawn often.
_WS = (["", " ", "\t", "  "], ["\n", "\x0c"])
_NAMES = (["foo", "foo-bar", "Foo.Bar_9", "a"], ["foo-", "_x", "-x", "foo bar", "foo."])
_EXTRAS = (["", "[x]", "[x,y]", "[ x , y ]"], ["[", "[]", "[x,]", "[x-]", "[x y]"])
_OPS = (["==", "!=", ">=", "<=", "<", ">", "~="], ["===", "=", "=>", "", "!"])
_ODD_TAILS = ["1.0-", "1.0.post-", "1.0alpha-2", "1.0.r.dev_", "1.0-a", "1.0bc", "1.0ab1"]
_ODD_TAILS += ["1.0-1-1", "1.0.dev1.post1", "1.0pre.preview", "1.0_c_", "1.0-r"]
_VERSIONS = (
    ["1.0", "1.2.3", "1.0a1", "1.0rc2.post3.dev4", "6.0dev", "2.2.post3", "10.1", "2.0.0b"],
    [
        "1",
        "1.0.*",
        "1.*",
        "1!2.0",
        "1.0+local",
        "v1.0",
        "1.0-1",
        ".1",
        "1..0",
        "x",
        "1.0a",
        "",
        *_ODD_TAILS,
    ],
)  # ("1", "1.*" and "1.0.*" are valid after some operators only; so are some odd tails)
_COMMAS = ([",", " , "], ["", ";", ",,"])
_PARENS = (["", "()"], ["(", ")"])
_VARIABLES = (
    ["extra", "python_version", "os_name", "platform_machine", "sys_platform"],
    ["os.name", "foo", "in", "not", "'x'", "extras"],
)
_MARKER_OPS = (["==", "!=", "<", ">=", "~=", "==="], ["=", "in", "not in", "", "=>"])
_QUOTED = (["'x'", '"3.8"', '"a(b"', "'a\"b'", '""'], ["'", "x", "extra", "'x", '"'])
_BOOLS = ([" and ", " or ", "\tand "], ["and", " AND ", " xor ", " ", ")and("])
_CLOSE = ([")"], ["", "))"])


@st.composite
def lines(draw: st.DrawFn) -> str:
    spoil = draw(st.integers(0, 40))  # the piece drawn invalid (none, past the last)
    count = 0

    def piece(kinds: tuple[list[str], list[str]]) -> str:
        nonlocal count
        count += 1
        return draw(st.sampled_from(kinds[1] if count == spoil else kinds[0]))

    def marker(depth: int) -> str:
        out = ""
        for k in range(draw(st.integers(1, 3))):
            out += piece(_BOOLS) if k else ""
            if depth and draw(st.integers(0, 3)) == 0:
                out += "(" + piece(_WS) + marker(depth - 1) + piece(_WS) + piece(_CLOSE)
                continue
            left, op, right = piece(_VARIABLES), piece(_MARKER_OPS), piece(_QUOTED)
            if draw(st.booleans()):
                left, right = right, left
            out += left + piece(_WS) + op + piece(_WS) + right
        return out

    specs = ""
    for k in range(draw(st.integers(0, 3))):
        specs += (piece(_COMMAS) if k else "") + piece(_OPS) + piece(_WS) + piece(_VERSIONS)
    parens = piece(_PARENS)
    if parens:
        specs = parens[0] + specs + parens[1:]
    line = piece(_WS) + piece(_NAMES) + piece(_WS) + piece(_EXTRAS) + piece(_WS) + specs
    if draw(st.booleans()):
        line += ";" + piece(_WS) + marker(2) + piece(_WS)
    return line


@settings(max_examples=3000, deadline=None)
@given(lines())
def test_a_line_read_without_packaging_is_one_packaging_accepts_with_that_name(line: str) -> None:
    name = _simple_name(line)
    try:
        theirs: Requirement | None = Requirement(line)
    except InvalidRequirement:
        theirs = None
    if name is not None:
        assert theirs is not None, line
        assert theirs.name == name
    try:
        ours = read_requires(line)
    except InvalidRequires:
        assert theirs is None, line
    else:
        assert theirs is not None and ours.name == theirs.name, line
