"""components/checks/children.py: the runtime check scripts' child processes and JSON lines,
driven through a real script that runs its modes in real child processes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CHECKS = Path(__file__).resolve().parents[2] / "components" / "checks"
SCRIPT = """\
import os, sys
sys.path.insert(0, {checks!r})
import children

def answer(spec, result):
    print("graph runtime: captured")
    result({{"value": spec["x"] * 2}})

def boom(spec, result):
    raise RuntimeError("no such operator: " + spec["op"])

def abort(spec, result):
    os.abort()

def hang(spec, result):
    import time; time.sleep(30)

MODES = {{"answer": answer, "boom": boom, "abort": abort, "hang": hang}}

if sys.argv[1:2] == ["--child"]:
    sys.exit(children.serve(MODES, sys.argv[2], __import__("json").loads(sys.argv[3])))
mode = sys.argv[1]
spec = __import__("json").loads(sys.argv[2])
seen = lambda output: {{"captured": "captured" in output}}
got = children.run_child(__file__, mode, spec, timeout=5, annotate=seen)
children.emit(mode, got.get("outcome") == "ok", **got)
children.emit("known", False, gap="not yet")
print(__import__("json").dumps({{"failed": children.FAILED, "gaps": children.GAPS}}))
"""


def run(tmp_path: Path, mode: str, spec: dict[str, object]) -> list[dict[str, object]]:
    script = tmp_path / "check.py"
    script.write_text(SCRIPT.format(checks=str(CHECKS)))
    done = subprocess.run(
        [sys.executable, str(script), mode, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_child_that_answers_reports_its_result_and_what_annotate_read(tmp_path: Path) -> None:
    line, gap, tally = run(tmp_path, "answer", {"x": 21})
    assert line["ok"] is True and line["outcome"] == "ok" and line["value"] == 42
    assert line["captured"] is True and "stderr_tail" not in line
    assert isinstance(line["seconds"], float)
    assert gap == {"check": "known", "ok": False, "required": False, "gap": "not yet"}
    assert tally == {"failed": [], "gaps": ["known"]}


def test_a_childs_whole_output_is_logged_as_one_marked_block(tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text(SCRIPT.format(checks=str(CHECKS)))
    done = subprocess.run(
        [sys.executable, str(script), "answer", json.dumps({"x": 21})],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    head, *rest = done.stderr.splitlines()
    assert head.startswith("child answer x=21: ok in ")
    assert rest == ["| graph runtime: captured"]
    assert not any("RESULT " in line for line in rest)  # (read by the parent, not logged)
    assert all(line.startswith("{") for line in done.stdout.splitlines())  # case lines only


def test_an_exception_in_the_child_is_its_result_and_exit_status_3(tmp_path: Path) -> None:
    line, _, tally = run(tmp_path, "boom", {"op": "embedding"})
    assert line["ok"] is False and line["outcome"] == "exit status 3"
    assert line["exception"] == "RuntimeError"
    assert line["message"] == "no such operator: embedding"
    assert tally["failed"] == ["boom"]


def test_a_child_that_aborts_is_reported_by_its_signal(tmp_path: Path) -> None:
    line, _, _ = run(tmp_path, "abort", {})
    assert line["outcome"] == "killed by SIGABRT" and "stderr_tail" in line


def test_a_child_that_hangs_is_a_failure_after_its_timeout(tmp_path: Path) -> None:
    line, _, tally = run(tmp_path, "hang", {})
    assert line["outcome"] == "timed out after 5s"
    assert tally["failed"] == ["hang"]


# --- side by side: the pool ----------------------------------------------------------------------

POOL_SCRIPT = """\
import json, os, signal, sys, time
from functools import partial
sys.path.insert(0, {checks!r})
import children

EVENTS = {events!r}
BARRIER = {barrier!r}

def note(what):
    with open(EVENTS, "a") as f:
        f.write(what + "\\n")

def wait(spec, result):
    # Ends only once ``spec["others"]`` siblings have started (or after 20 s: then they did not
    # run beside it); the last case to start is the first to end.
    note("start " + spec["name"])
    open(os.path.join(BARRIER, spec["name"]), "w").close()
    deadline = time.monotonic() + 20
    while len(os.listdir(BARRIER)) < spec["others"] + 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    beside = len(os.listdir(BARRIER)) - 1
    if spec.get("segfault"):
        note("end " + spec["name"])
        os.kill(os.getpid(), signal.SIGSEGV)
    note("end " + spec["name"])
    result({{"beside": beside}})

def case(name, others, segfault=False, alone=False):
    got = children.run_child(__file__, "wait", {{"name": name, "others": others,
                             "segfault": segfault}}, timeout=60, alone=alone)
    children.emit(name, got["outcome"] == "ok", outcome=got["outcome"], beside=got.get("beside"))

if sys.argv[1:2] == ["--child"]:
    sys.exit(children.serve({{"wait": wait}}, sys.argv[2], json.loads(sys.argv[3])))
plan = json.loads(sys.argv[1])
children.pool()
children.side_by_side(*(partial(case, *c) for c in plan))
print(json.dumps({{"check": "summary", "failed": children.FAILED, **children.timeline()}}))
"""


def run_pool(
    tmp_path: Path, plan: list[list[object]], jobs: int
) -> tuple[list[dict[str, object]], list[str]]:
    """The script's lines and the children's start/end events, its pool ``jobs`` wide."""
    script, events, barrier = tmp_path / "check.py", tmp_path / "events", tmp_path / "barrier"
    barrier.mkdir()
    script.write_text(
        POOL_SCRIPT.format(checks=str(CHECKS), events=str(events), barrier=str(barrier))
    )
    done = subprocess.run(
        [sys.executable, str(script), json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "INFINI_STACK_CHECK_JOBS": str(jobs)},
    )
    return [json.loads(line) for line in done.stdout.splitlines()], events.read_text().split("\n")


def most_at_once(events: list[str]) -> int:
    running = peak = 0
    for event in events:
        running += event.startswith("start ") - event.startswith("end ")
        peak = max(peak, running)
    return peak


def test_a_child_that_segfaults_among_parallel_ones_is_reported_and_the_others_finish(
    tmp_path: Path,
) -> None:
    plan = [["a", 2], ["crash", 2, True], ["c", 2]]
    lines, events = run_pool(tmp_path, plan, jobs=3)
    a, crash, c, summary = lines
    assert most_at_once(events) == 3  # all three ran at once
    assert crash["ok"] is False and crash["outcome"] == "killed by SIGSEGV"
    assert a["ok"] is True and c["ok"] is True and a["beside"] == c["beside"] == 2
    assert summary["failed"] == ["crash"] and summary["jobs"] == 3
    assert {child["outcome"] for child in summary["children"]} == {"ok", "killed by SIGSEGV"}


def test_the_lines_keep_the_order_of_the_cases_whatever_ends_first(tmp_path: Path) -> None:
    """Each case waits for the others to start: the last to start ends first."""
    plan = [[name, 3] for name in ("first", "second", "third", "fourth")]
    lines, events = run_pool(tmp_path, plan, jobs=4)
    assert [line["check"] for line in lines] == ["first", "second", "third", "fourth", "summary"]
    assert all(line.get("beside") == 3 for line in lines[:4])
    assert most_at_once(events) == 4


def test_one_job_is_the_serial_check(tmp_path: Path) -> None:
    plan = [["first", 0], ["second", 0], ["third", 0]]
    lines, events = run_pool(tmp_path, plan, jobs=1)
    assert [e for e in events if e] == [
        "start first", "end first", "start second", "end second", "start third", "end third"
    ]  # fmt: skip
    assert [line["check"] for line in lines] == ["first", "second", "third", "summary"]
    assert lines[-1]["jobs"] == 1


def test_a_child_that_must_be_alone_runs_with_no_other(tmp_path: Path) -> None:
    plan = [["a", 1], ["b", 1], ["tp2", 0, False, True], ["c", 1], ["d", 1]]
    lines, events = run_pool(tmp_path, plan, jobs=2)
    at = events.index("start tp2")
    assert events[at + 1] == "end tp2"  # nothing started or ended while it ran
    assert most_at_once(events[:at]) <= 2 and most_at_once(events[at + 2 :]) <= 2
    assert all(line.get("ok") for line in lines[:5])


def run_cpu_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], jobs: int):  # type: ignore[no-untyped-def]
    """components/checks/cpu.py's main() with stand-in children (the operators InfiniOps has
    agree, embedding and random_sample are missing): its lines and the threads its children
    were started from."""
    monkeypatch.setenv("INFINI_STACK_CHECK_JOBS", str(jobs))
    monkeypatch.setattr(sys, "argv", ["cpu.py"])
    monkeypatch.syspath_prepend(str(CHECKS))
    for name in ("children", "cpu_check"):
        sys.modules.pop(name, None)
    spec = importlib.util.spec_from_file_location("cpu_check", CHECKS / "cpu.py")
    assert spec is not None and spec.loader is not None
    cpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cpu)
    threads: set[int] = set()

    def child(mode: str, spec: dict[str, object]) -> dict[str, object]:
        threads.add(threading.get_ident())
        if mode == "import":
            return {"outcome": "ok", "infinicore": "/site/infinicore/__init__.py"}
        if mode == "op" and spec["op"] in cpu.NEEDED_ELSEWHERE:
            return {"outcome": "exit status 3", "exception": "RuntimeError", "message": "none"}
        if mode == "op":
            return {"outcome": "ok", "max_abs_err": 0.0}
        return {"outcome": "ok", "phase": "construct", "exception": "RuntimeError"}

    monkeypatch.setattr(cpu, "run_child", child)
    monkeypatch.setattr(cpu, "make_model", lambda directory: "w5 w17")
    monkeypatch.setattr(cpu, "reference", lambda directory: [1, 2, 3])
    assert cpu.main() == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()], threads


def test_the_cpu_check_gives_the_serial_lines_with_its_children_side_by_side(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serial, one = run_cpu_main(monkeypatch, capsys, jobs=1)
    parallel, several = run_cpu_main(monkeypatch, capsys, jobs=3)
    assert len(one) == 1 and len(several) > 1
    assert [line["check"] for line in serial] == [line["check"] for line in parallel]
    assert [line["check"] for line in parallel][-3:] == ["op:random_sample", "generate", "summary"]
    assert parallel[-1]["gaps"] == ["op:embedding", "op:random_sample", "generate"]
    assert "no CPU implementation of embedding, random_sample" in parallel[-2]["gap"]
