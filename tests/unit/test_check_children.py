"""components/checks/children.py: the runtime check scripts' child processes and JSON lines,
driven through a real script that runs its modes in real child processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
