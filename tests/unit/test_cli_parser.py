"""builder.cli.make_parser: every command is named; the one given is configured and parses its
command line; a typo is refused with every name."""

from __future__ import annotations

import argparse

import pytest

from builder.cli import make_parser
from builder.commands import COMMANDS


def commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_a_known_command_parses_its_own_options() -> None:
    argv = ["audit", "--no-cache", "--json", "x.whl"]
    parser = make_parser(argv)
    assert commands(parser) == list(COMMANDS)
    args = parser.parse_args(argv)
    assert args.command == "audit" and args.no_cache and args.json
    assert [str(w) for w in args.wheels] == ["x.whl"]


@pytest.mark.parametrize("argv", [[], ["--help"], ["--help", "audit"], ["audt"]])
def test_help_a_typo_or_no_command_names_every_command(argv: list[str]) -> None:
    assert commands(make_parser(argv)) == list(COMMANDS)


def test_a_typo_is_refused_with_every_command_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make_parser(["audt"]).parse_args(["audt"])
    err = capsys.readouterr().err
    assert "invalid choice: 'audt'" in err and all(f"'{name}'" in err for name in COMMANDS)
