"""``audit``'s plain command lines are read without argparse, exactly as argparse reads them."""

from __future__ import annotations

import random

import pytest

from builder.cli import make_parser, parse_quickly
from builder.commands import audit

PLAIN = [
    ["audit", "a.whl"],
    ["audit", "--no-cache", "a.whl", "b.whl"],
    ["audit", "a.whl", "--json", "--symbols"],
    ["audit", "-V", "nvidia", "--cuda-arch", "90", "--cuda-arch=100f", "a.whl"],
    ["audit", "--vendor=ali", "-j", "3", "--jobs=2", "a.whl"],
    ["audit", "--max-size", "95MiB", "--cache-dir", "c d", "--html", "out.html", "x y.whl"],
    ["audit", "-m", "stack.yaml", "--vendor=", "", "--no-cache"],
]

# What argparse alone reads (or refuses): help, abbreviations, joined short options, "--", a
# second run of wheels, a value that does not convert or looks like an option, "-".
ARGPARSE_ONLY = [
    ["audit", "-h"],
    ["audit", "a.whl", "--help"],
    ["audit", "--no-c", "a.whl"],
    ["audit", "-j4", "a.whl"],
    ["audit", "--", "a.whl"],
    ["audit", "a.whl", "--json", "b.whl"],
    ["audit", "--jobs", "x", "a.whl"],
    ["audit", "--jobs", "-1", "a.whl"],
    ["audit", "--max-size", "lots", "a.whl"],
    ["audit", "--vendor", "--json", "a.whl"],
    ["audit", "--json=yes", "a.whl"],
    ["audit", "-"],
    ["audit", "--json"],
    ["audit", "-V=cpu", "a.whl"],
    ["audit", "--unknown", "a.whl"],
]


def argparse_reads(words: list[str]) -> dict[str, object] | None:
    """argparse's namespace for ``words``, or None where it refuses them (exit 2) or prints
    help (exit 0)."""
    try:
        return vars(make_parser(words).parse_args(words))
    except SystemExit:
        return None


@pytest.mark.parametrize("words", PLAIN, ids=" ".join)
def test_plain_command_lines_are_read_without_argparse_as_argparse_reads_them(
    words: list[str],
) -> None:
    quick = parse_quickly(words)
    assert quick is not None
    expected = argparse_reads(words)
    assert expected is not None
    assert vars(quick) == expected
    assert all(isinstance(w, str) for w in quick.wheels)


@pytest.mark.parametrize("words", ARGPARSE_ONLY, ids=" ".join)
def test_what_only_argparse_reads_or_refuses_goes_to_it(words: list[str]) -> None:
    assert parse_quickly(words) is None


def test_generated_command_lines_are_read_as_argparse_reads_them_or_left_to_it() -> None:
    """Every command line made of these words that the quick reader answers, argparse reads
    the same; it answers most of those argparse accepts."""
    words = [
        *("a.whl", "b c.whl", "", "-", "--", "-h", "-1", "x"),
        *("--json", "--symbols", "--no-cache", "--no-c", "--json=1"),
        *("--vendor", "-V", "--vendor=nvidia", "cpu", "--cuda-arch", "--cuda-arch=90a", "90"),
        *("--jobs", "-j", "-j2", "--jobs=3", "4", "--max-size", "10MB", "--max-size=1x"),
        *("--manifest", "-m", "--html", "--cache-dir", "--cache-dir=d", "s.yaml"),
    ]
    chooser = random.Random(29)
    answered = agreed_by_argparse = 0
    for _ in range(3000):
        line = ["audit", *chooser.choices(words, k=chooser.randint(0, 6))]
        expected = argparse_reads(line)
        quick = parse_quickly(line)
        agreed_by_argparse += expected is not None
        if quick is not None:
            answered += 1
            assert vars(quick) == expected, line
    assert answered > agreed_by_argparse / 3, (answered, agreed_by_argparse)


def test_argparse_is_given_the_same_options_the_quick_reader_knows() -> None:
    parser = make_parser(["audit", "a.whl"])
    sub = next(a for a in parser._actions if a.dest == "command")
    child = sub.choices["audit"]  # type: ignore[attr-defined]
    spelled = {s for a in child._actions for s in a.option_strings} - {"-h", "--help"}
    assert spelled == {name for option in audit.OPTIONS for name in option.names}
