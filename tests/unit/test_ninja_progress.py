"""A compile followed through Ninja's status lines: parsed, shown at most once a minute per
component in plain output (a clock the test moves), on the live line, and in the run report."""

from __future__ import annotations

import io

from builder.engine.ninja_status import Status, duration, parse
from builder.engine.report import LiveProgress, Progress, summary_table


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_status_line_is_read_and_every_other_line_is_not() -> None:
    assert parse("[195/236] Building CXX object src/CMakeFiles/x.dir/a.cc.o\n") == Status(195, 236)
    assert parse("[0/4] Re-running CMake...") == Status(0, 4)
    assert parse("-- Configuring done") is None
    assert parse("ninja: no work to do.") is None
    assert parse("[7/3] not a status") is None
    assert parse("  [1/2] indented output of a compiler") is None


def test_plain_output_says_a_compile_at_most_once_a_minute_per_component() -> None:
    clock, stream = Clock(), io.StringIO()
    progress = Progress(stream, clock=clock)
    for at, done in ((0, 1), (10, 20), (59, 100)):
        clock.now = 1000.0 + at
        progress.compiling("infinilm", Status(done, 400))
    assert stream.getvalue() == ""  # a short compile says nothing
    clock.now = 1060.0
    progress.compiling("infinilm", Status(120, 400))
    progress.compiling("infiniops", Status(1, 50))  # its own minute starts now
    clock.now = 1100.0
    progress.compiling("infinilm", Status(200, 400))
    clock.now = 1121.0
    progress.compiling("infinilm", Status(242, 400))
    assert stream.getvalue().splitlines() == [
        "[infinilm] build 120/400, 2.0/s, about 2m20s left",
        "[infinilm] build 242/400, 2.0/s, about 1m19s left",
    ]
    clock.now = 1130.0
    progress.compiling("infiniops", Status(40, 50))
    assert stream.getvalue().splitlines()[-1] == "[infiniops] build 40/50, 0.6/s, about 18s left"
    progress.compiling("infinicore", Status(1, 239))  # heavy C++ on a busy machine
    clock.now = 1130.0 + 600
    progress.compiling("infinicore", Status(4, 239))
    # Under one edge in ten seconds the rate is in edges a minute, not "0.0/s".
    last = stream.getvalue().splitlines()[-1]
    assert last == "[infinicore] build 4/239, 0.4/min, about 9h47m left"


def test_the_live_line_of_a_compiling_component_shows_its_progress() -> None:
    clock, stream = Clock(), io.StringIO()
    progress = LiveProgress(stream, clock=clock)
    try:
        progress.start("infinilm", "0" * 64, 2)
        progress.step("infinilm", "build")
        progress.compiling("infinilm", Status(1, 236))
        clock.now += 97.0
        progress.compiling("infinilm", Status(195, 236))
        progress._print()
    finally:
        progress.close()
    assert "195/236, 2.0/s, about 20s left" in stream.getvalue()


def test_the_run_report_says_what_each_component_compiled() -> None:
    data = {
        "vendor": "cpu",
        "seconds": 12.0,
        "components": [
            {"name": "minirt", "status": "built", "key": "a" * 64, "seconds": 3.0,
             "steps": {"build": 2.0}, "compiled": [6, 6]},
            {"name": "miniops", "status": "hit", "key": "b" * 64, "seconds": 0.0},
        ],
    }  # fmt: skip
    assert "build 2.0s, compiled 6/6" in summary_table(data).splitlines()[1]


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (4.4, 61, 3599, 7260)] == ["4s", "1m01s", "59m59s", "2h01m"]
