"""builder.cli.make_parser: a known command gets its own subparser alone; help, a typo or no
command gets every name; both parse a command line the same way."""

from __future__ import annotations

import argparse

import pytest

from builder.cli import help_width, make_parser
from builder.commands import COMMANDS


def commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_a_known_command_is_the_only_subparser_and_parses_as_before() -> None:
    argv = ["audit", "--no-cache", "--json", "x.whl"]
    alone = make_parser(argv)
    assert commands(alone) == ["audit"]
    args = alone.parse_args(argv)
    assert args.command == "audit" and args.no_cache and args.json
    assert [str(w) for w in args.wheels] == ["x.whl"]


@pytest.mark.parametrize("argv", [[], ["--help"], ["--help", "audit"], ["audt"]])
def test_help_a_typo_or_no_command_gets_every_name(argv: list[str]) -> None:
    assert commands(make_parser(argv)) == list(COMMANDS)


def test_a_typo_is_refused_with_every_command_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make_parser(["audt"]).parse_args(["audt"])
    err = capsys.readouterr().err
    assert "invalid choice: 'audt'" in err and all(f"'{name}'" in err for name in COMMANDS)


@pytest.mark.parametrize("columns", [None, "100", "", "wide", "-3"])
def test_help_is_as_wide_as_argparse_would_make_it(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert help_width() == shutil.get_terminal_size().columns - 2
