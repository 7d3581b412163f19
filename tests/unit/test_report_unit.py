"""Run reports and progress output, without building anything."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from builder.core.errors import UsageError
from builder.core.layout import Layout
from builder.engine import report
from builder.engine.report import ComponentResult, RunReport


def sample() -> RunReport:
    r = RunReport(command="build", vendor="cpu", manifest="/m/stack.yaml", seconds=3.25)
    r.components = [
        ComponentResult(name="minirt", key="a" * 64, status="hit", prefix="/s/a/prefix"),
        ComponentResult(
            name="miniops",
            key="b" * 64,
            status="built",
            seconds=2.5,
            steps={"configure": 0.5, "build": 1.9, "install": 0.1},
            logs={"build": "/l/miniops/build.log"},
        ),
        ComponentResult(
            name="miniccl",
            key="c" * 64,
            status="failed",
            seconds=0.4,
            steps={"configure": 0.3},
            logs={"configure": "/l/c.log", "build": "/l/miniccl/build.log"},
            error="component 'miniccl', step build: c++ failed",
        ),
        ComponentResult(name="minilm", key="d" * 64),
    ]
    return r


def test_report_json_has_per_component_results_and_totals() -> None:
    data = sample().to_json()
    assert data["totals"] == {
        "hit": 1,
        "pulled": 0,
        "built": 1,
        "failed": 1,
        "skipped": 1,
        "interrupted": 0,
        "build_seconds": 2.5,
    }
    ops = data["components"][1]
    assert ops["key"] == "b" * 64
    assert ops["steps"] == {"configure": 0.5, "build": 1.9, "install": 0.1}
    assert ops["logs"] == {"build": "/l/miniops/build.log"}
    json.dumps(data)


def test_summary_table_has_a_row_per_component_and_a_totals_line() -> None:
    table = report.summary_table(sample().to_json())
    lines = table.splitlines()
    assert lines[0].split() == ["component", "status", "key", "seconds", "steps"]
    assert lines[1].split()[:4] == ["minirt", "hit", "a" * 12, "-"]
    assert "configure 0.5s, build 1.9s, install 0.1s" in lines[2]
    assert lines[-1] == "cpu: 1 built, 1 from the store, 1 failed, 1 skipped in 3.2s"


def test_write_keeps_every_report_and_points_last_at_the_newest(tmp_path: Path) -> None:
    layout = Layout.from_env({}, home=tmp_path)
    with pytest.raises(UsageError, match="no run report yet"):
        report.read_last(layout)
    first = report.write(sample(), layout)
    r = sample()
    r.vendor = "nvidia"
    second = report.write(r, layout)
    assert first != second and first.is_file() and second.is_file()
    assert json.loads(first.read_text())["vendor"] == "cpu"  # not overwritten by the second
    assert report.read_last(layout)["vendor"] == "nvidia"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_kind_follows_the_terminal_and_ci() -> None:
    assert type(report.progress_for("auto", io.StringIO(), {})) is report.Progress
    assert (
        type(report.progress_for("auto", io.StringIO(), {"GITHUB_ACTIONS": "true"}))
        is report.GithubProgress
    )
    live = report.progress_for("auto", Tty(), {"TERM": "xterm"})
    live.close()
    assert type(live) is report.LiveProgress
    assert type(report.progress_for("auto", Tty(), {"TERM": "dumb"})) is report.Progress


def test_github_progress_writes_one_fold_group_per_finished_component() -> None:
    out = io.StringIO()
    p = report.GithubProgress(out)
    results = sample().components
    p.start("miniops", "b" * 64, 2)
    p.step("miniops", "build")
    p.finish(results[1])
    p.finish(results[2])
    text = out.getvalue()
    assert text.count("::group::") == 2 and text.count("::endgroup::") == 2
    assert "::group::miniops: built in 2.5s" in text
    assert "build 1.9s  log: /l/miniops/build.log" in text
    assert "::error title=miniccl failed::component 'miniccl', step build: c++ failed" in text
    assert text.index("::group::miniops") < text.index("::endgroup::")


def test_live_progress_shows_a_line_per_running_component_with_its_elapsed_time() -> None:
    out = Tty()
    p = report.LiveProgress(out)
    p.start("minirt", "a" * 64, 1)
    p.step("minirt", "build")
    p.start("miniccl", "c" * 64, 1)
    text = out.getvalue()
    assert "minirt         build" in text and "s\n" in text
    assert "miniccl        starting" in text
    p.finish(sample().components[1])
    p.close()
    final = out.getvalue()
    assert "\x1b[" in final  # redrawn in place
    assert "[miniops] built in 2.5s (configure 0.5s, build 1.9s, install 0.1s)" in final


def test_plain_progress_is_one_line_per_event() -> None:
    out = io.StringIO()
    p = report.Progress(out)
    p.start("minirt", "a" * 64, 2)
    p.step("minirt", "configure")
    p.step_done("minirt", "configure", 0.25)
    p.waiting("miniops", "process 12")
    assert out.getvalue().splitlines() == [
        "[minirt] building (key aaaaaaaaaaaa, 2 jobs)",
        "[minirt] configure ...",
        "[minirt] configure done in 0.2s",
        "[miniops] waiting: process 12 is building the same store entry",
    ]


def test_a_corrupt_last_report_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    layout = Layout.from_env({}, home=tmp_path)
    layout.runs().mkdir(parents=True)
    for junk in ("{half", "[1, 2]"):
        (layout.runs() / "last.json").write_text(junk)
        with pytest.raises(UsageError, match="is not a run report"):
            report.read_last(layout)


def test_report_prints_the_build_and_the_release_against_their_bound(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    r = sample()
    r.cpu = {"cpu_seconds": 400.0, "cores": 16, "bound_seconds": 25.0, "wall_seconds": 40.0}
    r.cpu["ratio"] = 1.6
    r.release = {
        "ok": True,
        "stages": {"build": {"seconds": 40.0}},
        "cpu": {
            "cpu_seconds": 10060.0,
            "cores": 16,
            "bound_seconds": 628.75,
            "wall_seconds": 867.0,
            "ratio": 1.38,
        },
    }
    report.write(r, Layout.from_env({}, home=tmp_path))
    shown = cli("report", "--home", tmp_path).out.splitlines()
    assert (
        "build: 400.0 CPU-seconds on 16 cores, bound 25.0s; wall 40.0s = 1.60x the bound" in shown
    )
    assert (
        "release: 10060.0 CPU-seconds on 16 cores, bound 628.8s; wall 867.0s = 1.38x the bound"
        in shown
    )
    page = tmp_path / "run.html"
    assert cli("report", "--home", tmp_path, "--html", page).code == 0
    assert "release: 10060.0 CPU-seconds on 16 cores, bound 628.8s" in page.read_text()


def test_the_bound_of_a_run_is_its_cpu_work_over_its_cores() -> None:
    from builder.engine import bound

    start = bound.Mark(cpu=10.0, wall=100.0)
    figures = bound.since(start, bound.Mark(cpu=130.0, wall=130.0), cpus=4)
    assert figures == {
        "cpu_seconds": 120.0,
        "cores": 4,
        "bound_seconds": 30.0,
        "wall_seconds": 30.0,
        "ratio": 1.0,
    }
    assert bound.mark().cpu > 0 and bound.cores() >= 1
