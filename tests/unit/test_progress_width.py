"""Live progress lines fit the terminal: a line that wrapped would break the cursor-up redraw."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import termios
import time

from builder.engine.report import LiveProgress, clip, terminal_width

ESCAPES = re.compile(r"\x1b\[\d*[A-Za-z]")


def read_all(fd: int) -> str:
    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode()


def test_live_lines_on_a_20_column_terminal_never_reach_its_width() -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 20, 0, 0))
    with os.fdopen(slave, "w", encoding="utf-8") as stream:
        progress = LiveProgress(stream)
        progress.start("a-component-with-a-long-name", "0" * 64, 2)
        progress.step("a-component-with-a-long-name", "configure")
        progress.start("minirt", "1" * 64, 2)
        time.sleep(LiveProgress.REFRESH * 2)  # redraws from the ticking thread too
        output = read_all(master)
        progress.close()
    os.close(master)
    lines = [ESCAPES.sub("", line) for line in output.replace("\r", "").split("\n")]
    assert any("a-component" in line for line in lines)
    assert max(len(line) for line in lines) < 20, lines


def test_the_width_comes_from_the_terminal_then_columns_then_80() -> None:
    assert terminal_width(io.StringIO(), env={"COLUMNS": "33"}) == 33
    assert terminal_width(io.StringIO(), env={}) == 80


def test_clip_keeps_short_lines_and_marks_a_cut() -> None:
    assert clip("short", 20) == "short"
    assert clip("x" * 30, 20) == "x" * 16 + "..."
    assert len(clip("x" * 30, 3)) < 3
