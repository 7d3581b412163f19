"""builder.core.termwrap: lines wrapped to a terminal's width with hanging indents, paths broken
after a ``/``, and whole lines for anything that is not a terminal."""

from __future__ import annotations

import io
import os

import pytest

from builder.core import termwrap

LONG_PATH = "/opt/toolkits/" + "/".join(f"level{i:02d}" for i in range(14)) + "/libcudart.so.13"


def test_a_line_that_fits_is_kept_as_it_is() -> None:
    assert termwrap.wrap("  libfoo.so.1: system -> /usr/lib/libfoo.so.1", 80) == [
        "  libfoo.so.1: system -> /usr/lib/libfoo.so.1"
    ]


def test_continuation_lines_hang_below_the_lines_own_indent() -> None:
    line = "      " + " ".join(f"word{i}" for i in range(40))
    lines = termwrap.wrap(line, 40)
    assert len(lines) > 2 and all(len(part) <= 40 for part in lines)
    assert lines[0].startswith("      word0 ")
    assert all(part.startswith(" " * 10) and part[10] != " " for part in lines[1:])
    assert " ".join(part.strip() for part in lines) == line.strip()


def test_a_path_longer_than_a_line_breaks_after_a_slash_and_reads_whole_when_joined() -> None:
    lines = termwrap.wrap(f"  at {LONG_PATH} [PATH]", 50)
    assert all(len(part) <= 50 for part in lines)
    assert all(part.rstrip().endswith("/") for part in lines[:-2])
    joined = "".join(part.strip() for part in lines)
    assert LONG_PATH in joined and joined.count("libcudart") == 1


def test_a_word_without_separators_is_cut_at_the_width() -> None:
    assert termwrap.split_word("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_runs_of_spaces_between_columns_are_kept_on_the_first_line() -> None:
    line = "cxx-runtime     found  " + "shared " * 20
    assert termwrap.wrap(line, 60)[0].startswith("cxx-runtime     found  shared")


def test_none_means_whole_lines() -> None:
    text = "a" * 300 + "\n  " + "b " * 200
    assert termwrap.fit(text, None) == text
    assert termwrap.fit_lines(text.split("\n"), None) == text.split("\n")
    assert max(len(line) for line in termwrap.fit(text, 80).split("\n")) <= 80


def test_a_stream_that_is_no_terminal_has_no_width() -> None:
    assert termwrap.terminal_width(io.StringIO(), {"COLUMNS": "80"}) is None


@pytest.mark.parametrize(("columns", "wanted"), [("80", 80), ("132", 132), ("5", 20)])
def test_columns_sets_a_terminals_width(columns: str, wanted: int) -> None:
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as stream:
            assert termwrap.terminal_width(stream, {"COLUMNS": columns}) == wanted
    finally:
        os.close(leader)
        os.close(follower)


def test_without_columns_a_terminal_gives_its_own_width() -> None:
    leader, follower = os.openpty()
    try:
        os.set_blocking(leader, True)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 97, 0, 0))
        with os.fdopen(follower, "w", closefd=False) as stream:
            assert termwrap.terminal_width(stream, {}) == 97
    finally:
        os.close(leader)
        os.close(follower)
