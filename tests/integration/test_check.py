"""`infini-stack check`: the vendor's runtime check (stack.yaml vendors.<v>.check) run against an
installed wheel in a fresh venv that sees what an install into the target interpreter would see;
the release gate runs it where the vendor's device is present and says when it did not."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder.checks import venv
from tests.conftest import HAVE_NVCC, require_in_wheel
from tests.wheelmaker import make_wheel

pytestmark = pytest.mark.integration


@pytest.fixture
def mini_wheel(shared_home: Path, mini: Path, tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "dist")
    assert result.code == 0, result.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return wheel


def lines(out: str) -> dict[str, bool]:
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {row["check"]: row["ok"] for row in rows}


def test_the_mini_stack_check_imports_and_computes_in_a_fresh_venv(
    mini_wheel: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    result = cli("check", mini_wheel, "--manifest", mini)
    assert result.code == 0, result.err
    seen = lines(result.out)
    assert seen["summary"] is True
    # An exception thrown in libminicore_runtime reached Python as ValueError: one C++ runtime.
    assert seen["exception"] is True and seen["allreduce"] is True and seen["add"] is True
    assert "check engine.py: passed" in result.err


def test_a_failing_check_fails_the_command_with_its_output(
    mini_wheel: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    script = mini.parent / "components" / "checks" / "engine.py"
    script.write_text("import sys, minicore\nprint('the engine said boom')\nsys.exit(3)\n")
    result = cli("check", mini_wheel, "--manifest", mini)
    assert result.code == 7, result.err
    assert "check engine.py: FAILED (exit status 3)" in result.err
    assert "the engine said boom" in result.err
    assert "Traceback" not in result.err


def test_the_check_sees_the_packages_of_a_target_interpreter_that_is_itself_a_venv(
    mini_wheel: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    """A package installed only in the target venv (not in its base interpreter) is seen: the
    check's venv takes the target's site directories, not the base's."""
    target = venv.make(tmp_path / "target", sys.executable, inherit=False)
    only_there = make_wheel(
        tmp_path / "w",
        {"only_in_target/__init__.py": b"ANSWER = 42\n"},
        name="only_in_target",
        version="1.0",
        tag="py3-none-any",
    )
    venv.install(only_there, target, tmp_path)
    script = mini.parent / "components" / "checks" / "engine.py"
    script.write_text(
        "import sys\nimport minicore, only_in_target\n"
        "sys.exit(0 if only_in_target.ANSWER == 42 else 1)\n"
    )
    assert cli("check", mini_wheel, "--manifest", mini, "--python", target).code == 0
    # The base interpreter itself does not have it: the check did not fall back to it.
    plain = subprocess.run([sys.executable, "-c", "import only_in_target"], check=False)
    assert plain.returncode != 0


def no_devices(vendor: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``vendor``'s device listing made a real program that finds none, so that a test of the
    not-run path holds on a machine that has such a device too. Returns the file it appends a
    line to each time it runs."""
    from builder.vendors import REGISTRY

    lister = tmp_path / "list-devices"
    runs = tmp_path / "listings"
    lister.write_text(
        f"#!/bin/sh\necho run >> '{runs}'\necho 'No devices were found' >&2\nexit 6\n"
    )
    lister.chmod(0o755)
    monkeypatch.setitem(REGISTRY, vendor, replace(REGISTRY[vendor], device_command=(str(lister),)))
    return runs


def test_check_names_a_runtime_requirement_its_interpreter_lacks_before_it_runs(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    # The check would stop at its import (ModuleNotFoundError, exit 7): it says so first, as
    # release's preflight does, with the pip line.
    require_in_wheel(mini, "infini-stack-absent-dist>=1", "pytest")
    made = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "dist")
    assert made.code == 0, made.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    result = cli("check", wheel, "--manifest", mini)
    assert result.code == 3, result.err
    assert "infini-stack-absent-dist>=1 (not installed)" in result.err
    assert "-m pip install 'infini-stack-absent-dist>=1'" in result.err
    assert "pytest" not in result.err.split("hint:")[-1]  # installed here: not asked for
    assert "check: cpu.py on" not in result.err  # nothing ran
    assert "Traceback" not in result.err


def test_check_of_a_vendor_without_its_device_here_says_so_and_exits_3(
    mini_wheel: Path, mini: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    no_devices("nvidia", tmp_path, monkeypatch)
    renamed = mini_wheel.with_name(mini_wheel.name.replace("+cpu", "+cu130"))
    renamed.write_bytes(mini_wheel.read_bytes())
    result = cli("check", renamed, "--manifest", mini)
    assert result.code == 3, result.err
    assert "check: not run (no nvidia device" in result.err


def test_check_of_a_vendor_with_no_declared_check_is_a_usage_error(
    mini_wheel: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    text = mini.read_text()
    cpu = text.index("  cpu:\n")
    declared = text.index("\n", cpu + len("  cpu:\n"))  # the cpu entry's one line: its check
    mini.write_text(text[:cpu] + "  cpu: {}" + text[declared:])
    result = cli("check", mini_wheel, "--manifest", mini)
    assert result.code == 2, result.err
    assert "declares no runtime check for cpu" in result.err


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc to build the nvidia mini stack")
def test_release_without_the_vendors_device_prints_the_not_run_line_and_lists_devices_once(
    home: Path, mini: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Preflight asks whether the check will run, and the check stage again: the device is
    listed once for both."""
    listings = no_devices("nvidia", tmp_path, monkeypatch)
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "nvidia", "--no-verify", "-o", out)
    assert result.code == 0, result.err
    assert "check: not run (no nvidia device" in result.err
    report = json.loads((out / "release-report.json").read_text())
    assert report["steps"]["check"]["ran"] is False
    assert not (out / "check.log").exists()
    assert listings.read_text().splitlines() == ["run"]


def test_release_strict_refuses_when_the_check_cannot_run(
    shared_home: Path, mini: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A cpu vendor whose device listing finds nothing (a real program that says so)."""
    no_devices("cpu", tmp_path, monkeypatch)
    out = tmp_path / "release"
    result = cli(
        "release", "--manifest", mini, "--vendor", "cpu", "--no-verify", "--strict", "-o", out
    )
    assert result.code == 7, result.err
    assert "check: not run (no cpu device: list-devices: No devices were found)" in result.err
    assert "--strict asks for it" in result.err
    assert not out.exists()  # nothing written
    relaxed = cli("release", "--manifest", mini, "--vendor", "cpu", "--no-verify", "-o", out)
    assert relaxed.code == 0, relaxed.err
    assert "check: not run (no cpu device" in relaxed.err


CASE_SCRIPT = """\
import json, os, sys
import minicore
argmax = os.environ.get("INFINI_STACK_CHECK_FORCE_ARGMAX") == "1"
print(json.dumps({"check": "generate.paged.paged-attn", "ok": True, "cache": "paged",
                  "backend": "paged-attn", "graph": False, "batch": 2,
                  "expected": [4, 5], "got": [4, 5]}))
print(json.dumps({"check": "sampling.t1", "ok": not argmax, "cache": "paged",
                  "backend": "paged-attn", "graph": False, "batch": 64,
                  "expected": "softmax", "got": "argmax" if argmax else "draws"}))
print("tp2: not run (1 GPU)")
print(json.dumps({"check": "tp2", "ok": False, "required": False, "not_run": "1 GPU"}))
print(json.dumps({"check": "nvls", "ok": os.environ.get("NCCL_NVLS_ENABLE") == "0"}))
sys.exit(1 if argmax else 0)
"""


def test_check_prints_its_json_lines_then_the_table_of_its_cases(
    mini_wheel: Path, mini: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    (mini.parent / "components" / "checks" / "engine.py").write_text(CASE_SCRIPT)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the check's children get 0 whatever is set
    monkeypatch.setenv("INFINI_STACK_CHECK_FORCE_ARGMAX", "1")  # only --force-argmax sets it
    result = cli("check", mini_wheel, "--manifest", mini)
    assert result.code == 0, result.err
    seen = lines(result.out)
    assert seen["nvls"] is True and seen["sampling.t1"] is True and seen["tp2"] is False
    assert "tp2: not run (1 GPU)" in result.out.splitlines()
    table = result.out[result.out.index("\ncase ") + 1 :].splitlines()
    assert table[0].split()[:4] == ["case", "cache", "backend", "graph"]
    body = [line.split() for line in table[2:]]
    assert body[0] == [
        "generate.paged.paged-attn", "paged", "paged-attn", "off", "2", "4", "5", "4", "5", "pass"
    ]  # fmt: skip
    assert body[1][0] == "sampling.t1" and body[1][-1] == "pass"
    assert body[2] == ["tp2", "-", "-", "-", "-", "-", "-", "not", "run", "(1", "GPU)"]


def test_force_argmax_reaches_the_script_and_fails_its_statistics(
    mini_wheel: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    (mini.parent / "components" / "checks" / "engine.py").write_text(CASE_SCRIPT)
    result = cli("check", mini_wheel, "--manifest", mini, "--force-argmax")
    assert result.code == 7, result.err
    assert lines(result.out)["sampling.t1"] is False
    assert "sampling.t1" in result.out and "FAIL" in result.out.split("\ncase ", 1)[1]
    assert "check engine.py: FAILED (exit status 1)" in result.err


def test_release_writes_the_table_into_check_log_and_report_html_shows_it(
    shared_home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    (mini.parent / "components" / "checks" / "engine.py").write_text(CASE_SCRIPT)
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "--no-verify", "-o", out)
    assert result.code == 0, result.err
    log = (out / "check.log").read_text()
    assert log.index('{"check": "tp2"') < log.index("\ncase ")  # the lines, then the table
    table = log[log.index("\ncase ") + 1 :].splitlines()
    assert [row.split()[0] for row in table[2:]] == [
        "generate.paged.paged-attn",
        "sampling.t1",
        "tp2",
    ]
    report = json.loads((out / "release-report.json").read_text())
    rows = report["steps"]["check"]["rows"]
    assert [row["verdict"] for row in rows] == ["pass", "pass", "not run (1 GPU)"]
    page = tmp_path / "run.html"
    assert cli("report", "--html", page).code == 0
    html = page.read_text()
    section = html[html.index("<section id='check'>") :]
    assert (
        "<td>generate.paged.paged-attn</td><td>paged</td><td>paged-attn</td><td>off</td>" in section
    )
    assert "<td>not run (1 GPU)</td>" in section


def stand_in_gpu(vendor: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``vendor``'s device listing made a real program that finds one stand-in GPU."""
    from builder.vendors import REGISTRY

    lister = tmp_path / "list-gpus"
    lister.write_text("#!/bin/sh\necho 'GPU 0: stand-in (UUID: GPU-0)'\n")
    lister.chmod(0o755)
    monkeypatch.setitem(REGISTRY, vendor, replace(REGISTRY[vendor], device_command=(str(lister),)))


# The nvidia check's shape with stand-in children: each case a child process run through the
# check's own children.py, the statistical cases failing under --force-argmax, tp2 alone. Each
# child waits (up to 20 s) until as many siblings as the pool holds have started: "beside" says
# how many it saw.
NVIDIA_STANDIN = """\
import json, os, sys, time
from functools import partial
import children

BARRIER = os.path.join(os.environ["STANDIN_BARRIER"])
CASES = ("generate.static.default", "generate.paged.paged-attn", "reject.paged.flashinfer",
         "sampling.t1", "sampling.t0.5")
STATISTICAL = ("sampling.t1", "sampling.t0.5")

def engine(spec, result):
    import minicore  # the wheel's engine, as InfiniLM would be
    open(os.path.join(BARRIER, spec["case"]), "w").close()
    deadline = time.monotonic() + 20
    while len(os.listdir(BARRIER)) < spec["others"] + 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    argmax = os.environ.get("INFINI_STACK_CHECK_FORCE_ARGMAX") == "1"
    result({"holds": not (argmax and spec["case"] in STATISTICAL),
            "beside": len(os.listdir(BARRIER)) - 1, "sum": minicore.add([1.0], [2.0])[0]})

def case(name, others, alone=False):
    got = children.run_child(__file__, "engine", {"case": name, "others": others},
                             timeout=60, alone=alone)
    children.emit(name, got.get("holds") is True and got.get("sum") == 3.0, cache="paged",
                  backend="paged-attn", graph=False, batch=1, expected=[3], got=[3],
                  beside=got.get("beside"), outcome=got["outcome"])

if sys.argv[1:2] == ["--child"]:
    sys.exit(children.serve({"engine": engine}, sys.argv[2], json.loads(sys.argv[3])))
jobs = children.pool(children.jobs_for(device_bytes=4 << 30, child_bytes=1 << 30)).jobs
others = min(jobs, len(CASES)) - 1
children.side_by_side(*(partial(case, name, others) for name in CASES),
                      partial(case, "tp2", 0, alone=True))
print(json.dumps({"check": "summary", "ok": not children.FAILED, "failed": children.FAILED,
                  **children.timeline()}))
sys.exit(1 if children.FAILED else 0)
"""


@pytest.fixture
def nvidia_standin(
    mini_wheel: Path, mini: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The mini wheel as an nvidia one, a stand-in GPU, and the stand-in nvidia check beside the
    mini stack's children.py: returns the wheel."""
    stand_in_gpu("nvidia", tmp_path, monkeypatch)
    checks = mini.parent / "components" / "checks"
    assert (checks / "children.py").read_text().startswith('"""What the runtime check scripts')
    (checks / "engine.py").write_text(NVIDIA_STANDIN)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    monkeypatch.setenv("STANDIN_BARRIER", str(barrier))
    renamed = mini_wheel.with_name(mini_wheel.name.replace("+cpu", "+cu130"))
    renamed.write_bytes(mini_wheel.read_bytes())
    return renamed


def summary_of(out: str) -> dict[str, Any]:
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return next(row for row in rows if row["check"] == "summary")


def overlapping(children: list[dict[str, Any]]) -> bool:
    spans = sorted((c["start"], c["start"] + c["seconds"]) for c in children)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def test_the_mini_nvidia_check_runs_its_stand_in_children_side_by_side(
    nvidia_standin: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    result = cli("check", nvidia_standin, "--manifest", mini, "--check-jobs", "5")
    assert result.code == 0, result.err
    rows = [json.loads(line) for line in result.out.splitlines() if line.startswith("{")]
    cases = [row for row in rows if row["check"] != "summary"]
    assert [row["check"] for row in cases] == [
        "generate.static.default", "generate.paged.paged-attn", "reject.paged.flashinfer",
        "sampling.t1", "sampling.t0.5", "tp2",
    ]  # fmt: skip
    assert all(row["beside"] == 4 for row in cases[:5])  # the five saw each other start
    summary = summary_of(result.out)
    assert summary["jobs"] == 5 and overlapping(summary["children"])
    tp2 = next(c for c in summary["children"] if c["child"].endswith("case=tp2 others=0"))
    others = [c for c in summary["children"] if c is not tp2]
    assert all(c["start"] + c["seconds"] <= tp2["start"] for c in others)  # alone: after them


def test_check_jobs_1_is_the_serial_check_and_force_argmax_fails_the_statistical_cases(
    nvidia_standin: Path, mini: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    result = cli("check", nvidia_standin, "--manifest", mini, "--check-jobs", "1", "--force-argmax")
    assert result.code == 7, result.err
    summary = summary_of(result.out)
    assert summary["jobs"] == 1 and not overlapping(summary["children"])
    assert summary["failed"] == ["sampling.t1", "sampling.t0.5"]
    verdicts = [line.split()[0] for line in result.out.split("\ncase ", 1)[1].splitlines()[2:]]
    assert verdicts[:3] == ["generate.static.default", "generate.paged.paged-attn",
                            "reject.paged.flashinfer"]  # fmt: skip
