"""Options checked before any work starts, with the documented exit codes; common options
accepted before the command; a closed pipe ends quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from builder.cli import common_first, main
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["--manifest", "x.yaml", "build"], ["build", "--manifest", "x.yaml"]),
        (["--vendor=cpu", "--json", "plan", "-j", "2"],
         ["plan", "--vendor=cpu", "--json", "-j", "2"]),
        (["-m", "x.yaml", "--home", "h", "wheel", "--out", "o"],
         ["wheel", "-m", "x.yaml", "--home", "h", "--out", "o"]),
        (["build", "--manifest", "x.yaml"], ["build", "--manifest", "x.yaml"]),
        (["--help"], ["--help"]),
        (["--version"], ["--version"]),
    ],
)  # fmt: skip
def test_common_options_before_the_command_are_moved_after_it(
    words: list[str], expected: list[str]
) -> None:
    assert common_first(words) == expected


def test_a_common_option_before_the_command_is_parsed_as_after_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--vendor", "cpu", "--jobs", "3", "plan", "--json"])
    assert code == 0, capsys.readouterr().err
    assert '"jobs": 3' in capsys.readouterr().out


@pytest.mark.parametrize("jobs", ["0", "-3", "two"])
def test_jobs_below_one_is_refused_at_parse_time(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["plan", "--vendor", "cpu", f"--jobs={jobs}"])
    assert stop.value.code == 2
    assert "--jobs" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["check", "x.whl"], ["release", "-o", "out"]])
def test_check_jobs_below_one_is_refused_at_parse_time(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*command, "--check-jobs", "0"])
    assert stop.value.code == 2
    assert "--check-jobs" in capsys.readouterr().err


def test_home_naming_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "a file"
    file.write_text("")
    assert main(["plan", "--vendor", "cpu", "--home", str(file)]) == 2
    assert f"--home {file} is a file, not a directory" in capsys.readouterr().err


def test_wheel_out_naming_a_file_is_refused_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "dist"
    file.write_text("")
    home = tmp_path / "home"
    code = main(["wheel", "--vendor", "cpu", "--home", str(home), "--out", str(file)])
    assert code == 2
    assert "--out" in capsys.readouterr().err
    assert not home.exists()  # nothing was built, not even the state directory made


def test_report_html_into_a_directory_that_cannot_be_written_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "a file"  # (the tests run as root, who may write any directory)
    file.write_text("")
    assert main(["report", "--html", str(file / "report.html")]) == 2
    assert f"{file} cannot be written" in capsys.readouterr().err


@pytest.mark.parametrize("words", ["plan --vendor cpu", "--version", "--help", "plan --help"])
def test_a_command_piped_into_a_closed_pipe_ends_quietly(words: str) -> None:
    # true exits before the command writes; --version and --help print while their
    # command line is parsed
    shell = f"'{sys.executable}' -m builder {words} | true"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_vendor_help_names_every_vendor_and_alias() -> None:
    from builder.commands.common import VENDOR_HELP
    from builder.vendors import ALIASES, REGISTRY

    words = set(VENDOR_HELP.replace(",", " ").replace("(", " ").replace(")", " ").split())
    assert set(REGISTRY) | set(ALIASES) <= words
