"""On a terminal (a pseudo-terminal, COLUMNS=80), preflight, plan and audit print no line wider
than 80 columns; the same commands piped print whole lines, as before."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MINI, ROOT
from tests.wheelmaker import small_extension_wheel

WIDTH = 80


def environment(home: Path) -> dict[str, str]:
    return {**os.environ, "INFINI_STACK_HOME": str(home), "COLUMNS": str(WIDTH)}


def on_terminal(args: list[str], home: Path, tmp_path: Path) -> str:
    """The command's standard output, written to a pseudo-terminal (stderr to a file)."""
    leader, follower = os.openpty()
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "builder", *args],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=stderr,
            env=environment(home),
            cwd=ROOT,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the command closed its end
                break
            if not data:
                break
            chunks.append(data)
        process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def piped(args: list[str], home: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "builder", *args],
        check=True,
        capture_output=True,
        text=True,
        env=environment(home),
        cwd=ROOT,
        timeout=120,
    ).stdout


def commands(tmp_path: Path) -> dict[str, list[str]]:
    manifest = str(MINI / "stack.yaml")
    runs = {
        "preflight": ["preflight", "--manifest", manifest, "--vendor", "cpu"],
        "plan": ["plan", "--manifest", manifest, "--vendor", "cpu"],
    }
    wheel = small_extension_wheel(tmp_path / "wheel")
    if wheel is not None:
        runs["audit"] = ["audit", "--no-cache", str(wheel)]
    return runs


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """Per command: (on a terminal, piped), with a home under a path that has a space."""
    tmp_path = tmp_path_factory.mktemp("terminal")
    home = tmp_path / "a home with a long name, for long paths" / "infini-stack"
    found = {}
    for name, args in commands(tmp_path).items():
        found[name] = (on_terminal(args, home, tmp_path), piped(args, home))
    return found


def output(outputs: dict[str, tuple[str, str]], name: str) -> tuple[str, str]:
    if name not in outputs:
        pytest.skip("no gcc to build the wheel to audit")
    return outputs[name]


@pytest.mark.parametrize("name", ["preflight", "plan", "audit"])
def test_on_a_terminal_no_line_is_wider_than_it(
    outputs: dict[str, tuple[str, str]], name: str
) -> None:
    terminal, pipe = output(outputs, name)
    assert terminal.strip(), "the command printed nothing on the terminal"
    wide = [line for line in terminal.splitlines() if len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    assert max(len(line) for line in pipe.splitlines()) > WIDTH  # (there was something to wrap)


def words(text: str) -> str:
    """``text`` without its layout (spaces, line breaks, the shell's ``\\``) or timings."""
    return re.sub(r"\d+\.\d+", "N", "".join(text.replace(" \\\n", " ").split()))


@pytest.mark.parametrize("name", ["plan", "audit"])
def test_piped_the_same_text_comes_in_whole_lines(
    outputs: dict[str, tuple[str, str]], name: str
) -> None:
    terminal, pipe = output(outputs, name)
    assert words(terminal) == words(pipe)
    assert not any(line.endswith(" \\") or line.startswith("    -D") for line in pipe.split("\n"))


def test_plan_on_a_terminal_shows_one_cmake_option_a_line(
    outputs: dict[str, tuple[str, str]],
) -> None:
    terminal, pipe = outputs["plan"]
    options = [w for w in pipe.split() if w.lstrip("'").startswith("-D")]
    starts = [line for line in terminal.splitlines() if re.match(r"    '?-D", line)]
    assert len(options) > 10 and len(starts) == len(options)
    assert all(sum(w.lstrip("'").startswith("-D") for w in line.split()) == 1 for line in starts)


def test_piped_preflight_is_the_table(outputs: dict[str, tuple[str, str]]) -> None:
    terminal, pipe = outputs["preflight"]
    header = pipe.splitlines()[1].split()
    assert header == ["provider", "wanted", "found", "where", "status", "hint"]
    row = next(line for line in pipe.splitlines() if line.startswith("python-headers "))
    path = next(word for word in row.split() if word.endswith("/Python.h"))  # its "where"
    assert "".join(pipe.split()).count(path) == 1  # shown once, whole, piped and on the terminal
    assert "".join(terminal.split()).count(path) == 1
