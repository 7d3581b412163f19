"""builder.cli.make_parser: a known command gets its own subparser alone; help, a typo or no
command gets every name; both parse a command line the same way; a small wheel's audit imports
neither zipfile, shutil, threading, typing, hashlib nor packaging.version."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli import help_width, make_parser
from builder.commands import COMMANDS
from tests.conftest import ROOT
from tests.wheelmaker import make_wheel, small_extension_wheel


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
    packaging.version. As the launcher starts an audit, without ``site`` (given the paths that
    this interpreter's ``site`` found)."""
    wheel = small_extension_wheel(tmp_path) or make_wheel(tmp_path, {"small/__init__.py": b""})
    code = (
        "import os, sys; sys.path[:0] = sys.argv.pop(1).split(os.pathsep)\n"
        "from builder.cli import main\n"
        "status = main(['audit', '--no-cache', sys.argv[1]])\n"
        "print(status, ' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, os.pathsep.join([str(ROOT), *sys.path]), str(wheel)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.splitlines()[-1]
    status, *modules = out.split()
    assert status == "0", out
    assert "wheels.audit.directory" in modules  # (the audit did run here)
    unwanted = {"zipfile", "shutil", "bz2", "lzma", "threading", "queue", "typing", "hashlib"}
    assert not (unwanted | {"base64", "packaging.version", "dataclasses"}) & set(modules)
