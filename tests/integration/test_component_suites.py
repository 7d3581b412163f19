"""The mini stack's own pytest suite (MiniOps' tests/) as a gate: `build --test` and `release`
run it on the store entry, report its counts and its deselection with the reason, and a failing
test fails both with exit 5, named with its first lines."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from builder.core.orphans import session_members
from tests.conftest import last_report, wait_for
from tests.integration.test_build_engine import builder_process, statuses

pytestmark = pytest.mark.integration

BROKEN = '''
def test_gemm_of_nothing_is_an_error(miniops):
    """MiniOps returns 0 for an empty gemm; this case says it must not."""
    assert miniops.miniops_gemm(None, None, None, 0, 0, 0) == -1, "an empty gemm must fail"
'''
CRASHING = '''
import os
import signal


def test_a_kernel_that_divides_by_zero(miniops):
    """Dies as InfiniOps' add of an empty tensor does on NVIDIA: SIGFPE, no Python error."""
    os.kill(os.getpid(), signal.SIGFPE)
'''
PAUSING = """
import os
import time
from pathlib import Path


def test_waits_while_its_flag_is_there():
    Path(os.environ["MINI_PAUSED"]).write_text(str(os.getpid()))
    while Path(os.environ["MINI_PAUSE"]).exists():
        time.sleep(0.05)
"""
DESELECTED = (
    "tests/test_ops.py::test_gemm[cpu-512-512-512]: "
    "the Python reference takes minutes of a shared CI core"
)


@pytest.fixture
def broken(mini: Path) -> Path:
    """The mini stack with a failing case in MiniOps' suite."""
    (mini.parent / "ops" / "tests" / "test_broken.py").write_text(BROKEN)
    return mini


def test_release_runs_the_suite_on_the_bundled_entry_and_reports_its_deselection(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", tmp_path / "r")
    assert result.code == 0, result.err
    assert "suite miniops: ok, 13 passed, 1 deselected" in result.err
    assert f"  deselected {DESELECTED}" in result.err
    report = last_report(shared_home)
    miniops = report["components"][1]
    assert miniops["status"] == "hit"  # the entry the wheel bundles, not a build of its own
    suite = miniops["suite"]
    assert suite["ok"] and suite["counts"]["passed"] == 13 and suite["counts"]["failed"] == 0
    assert "--devices" in suite["command"] and "cpu" in suite["command"]
    assert suite["deselected"] == [
        {
            "test": "tests/test_ops.py::test_gemm[cpu-512-512-512]",
            "reason": "the Python reference takes minutes of a shared CI core",
        }
    ]
    shown = cli("report")
    assert f"  deselected {DESELECTED}" in shown.out
    page = tmp_path / "report.html"
    assert cli("report", "--html", page).code == 0
    assert "<section id='suites'>" in page.read_text()


def test_a_failing_component_test_fails_release_and_build_test_with_exit_5(
    shared_home: Path,
    broken: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "release"
    result = cli("release", "--manifest", broken, "--vendor", "cpu", "-o", out)
    assert result.code == 5, result.err
    assert "component 'miniops', suite: 1 test(s) failed" in result.err
    assert "FAILED tests/test_broken.py::test_gemm_of_nothing_is_an_error" in result.err
    assert "an empty gemm must fail" in result.err  # its first lines
    assert "Traceback" not in result.err
    assert not out.exists()  # no wheel written
    # What it made is kept, the failing suite's log with the build's run report.
    kept = tmp_path / "release.failed"
    assert (kept / "logs" / "miniops-suite.log").is_file()
    assert (kept / "logs" / "build-report.json").is_file()
    report = last_report(shared_home)
    assert report["command"] == "release" and not report["ok"]
    assert {c["name"]: c["status"] for c in report["components"]}["miniops"] == "failed"

    # The release built MiniLM; an edit to it has build --test build it again.
    (broken.parent / "engine" / "EDITED").write_text("an edit to MiniLM's source tree\n")
    result = cli("build", "--manifest", broken, "--vendor", "cpu", "--test")
    assert result.code == 5, result.err
    assert "FAILED tests/test_broken.py::test_gemm_of_nothing_is_an_error" in result.err
    report = last_report(shared_home)
    components = {c["name"]: c for c in report["components"]}
    assert components["miniops"]["status"] == "failed"
    # What depends on MiniOps needs its entry, not its suite's verdict: it was built beside
    # the suite, not skipped after the failure.
    suite = components["miniops"]["suite"]
    assert components["minilm"]["status"] == "built"
    assert components["minilm"]["started"] < suite["started"] + suite["seconds"]
    failure = report["components"][1]["suite"]["failures"][0]
    assert failure["test"] == "tests/test_broken.py::test_gemm_of_nothing_is_an_error"


def test_a_test_that_kills_its_process_is_one_failure_and_the_rest_of_the_suite_runs(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    (mini.parent / "ops" / "tests" / "test_crash.py").write_text(CRASHING)
    result = cli("build", "--manifest", mini, "--vendor", "cpu", "--test")
    assert result.code == 5, result.err
    assert "Traceback" not in result.err
    assert "FAILED tests/test_crash.py::test_a_kernel_that_divides_by_zero" in result.err
    assert "crashed" in result.err  # xdist's word for a worker that died under the test
    suite = {c["name"]: c for c in last_report(shared_home)["components"]}["miniops"]["suite"]
    # The other 13 tests of MiniOps' suite still ran in a fresh worker, and passed; the crash
    # is the one error, named with xdist's line.
    assert suite["counts"]["passed"] == 13 and suite["counts"]["errors"] == 1
    assert suite["failures"] == [
        {
            "test": "tests/test_crash.py::test_a_kernel_that_divides_by_zero",
            "output": "worker 'gw0' crashed while running "
            "'tests/test_crash.py::test_a_kernel_that_divides_by_zero'",
        }
    ]
    assert suite["workers"] == 1


def test_a_build_stopped_while_a_suite_runs_says_so_and_keeps_the_built_entry(
    home: Path, mini: Path, tmp_path: Path
) -> None:
    (mini.parent / "ops" / "tests" / "test_pausing.py").write_text(PAUSING)
    flag, paused = tmp_path / "pause", tmp_path / "paused"
    flag.touch()
    argv = ("build", "--manifest", mini, "--vendor", "cpu", "-c", "miniops", "--test")
    p = builder_process(*argv, home=home, MINI_PAUSE=str(flag), MINI_PAUSED=str(paused))
    try:
        wait_for(paused, timeout=300)
        pytest_session = os.getsid(int(paused.read_text()))
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM while building miniops (tests)" in err
    assert "Traceback" not in err
    assert not session_members(pytest_session)  # its workers were stopped too
    # The entry was built and stays; its suite, not the component, was interrupted.
    assert statuses(home) == {"minirt": "built", "miniops": "built"}
    (miniops,) = [c for c in last_report(home)["components"] if c["name"] == "miniops"]
    assert miniops["suite"]["interrupted"] is True
    assert "suite miniops: interrupted" in err


def test_build_test_tests_the_stored_entries_and_wheel_then_packages_them(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # The store holds the plain build: --test builds nothing new for the wheel, it tests it.
    result = cli("build", "--manifest", mini, "--vendor", "cpu", "--test", "-j", "2")
    assert result.code == 0, result.err
    components = {c["name"]: c for c in last_report(shared_home)["components"]}
    assert {c["status"] for c in components.values()} == {"hit"}
    minirt = components["minirt"]
    # MiniRT's ctest ran on the hit, built beside its entry with the test's option.
    assert {"test-configure", "test-build", "test"} <= set(minirt["steps"])
    ctest = Path(minirt["logs"]["test"]).read_text()
    assert "100% tests passed" in ctest
    assert components["miniops"]["suite"]["ok"] is True
    keys = {name: c["key"] for name, c in components.items()}

    wheel = cli("wheel", "--manifest", mini, "--vendor", "cpu", "-o", tmp_path / "dist")
    assert wheel.code == 0, wheel.err
    packaged = {c["name"]: c for c in last_report(shared_home)["components"]}
    assert {c["status"] for c in packaged.values()} == {"hit"}
    assert {name: c["key"] for name, c in packaged.items()} == keys
    assert len(list((tmp_path / "dist").glob("*.whl"))) == 1
