"""builder.cli.make_parser: a known command gets its own subparser alone; help, a typo or no
command gets every name; both parse a command line the same way; a small wheel's audit imports
neither zipfile, shutil, threading, typing, hashlib nor packaging.version."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from builder.cli import help_width, make_parser
from builder.commands import COMMANDS
from tests.wheelmaker import make_wheel, modules_of_an_audit, small_extension_wheel


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


def test_auditing_a_small_wheel_imports_no_zipfile_shutil_threading_typing_or_hashlib(
    tmp_path: Path,
) -> None:
    """The central directory is read without zipfile, argparse's width found without shutil
    (each imports bz2 and lzma), and no thread is started for a small wheel, so threading and
    queue stay out; typing is imported for type checkers only, the members are hashed by the
    interpreter's own sha256 (not hashlib's OpenSSL), and the wheel's version is read without
    packaging.version, its command line without argparse, and its paths without pathlib. As the
    launcher starts an audit, without ``site`` (given the paths that this interpreter's ``site``
    found)."""
    wheel = small_extension_wheel(tmp_path) or make_wheel(tmp_path, {"small/__init__.py": b""})
    status, modules = modules_of_an_audit(wheel, tmp_path)
    assert status == "0", status
    assert "wheels.audit.directory" in modules  # (the audit did run here)
    unwanted = {"zipfile", "shutil", "bz2", "lzma", "threading", "queue", "typing", "hashlib"}
    unwanted |= {"argparse", "gettext", "locale", "pathlib"}
    assert not (unwanted | {"base64", "packaging.version", "dataclasses"}) & modules
