"""The build engine on the real mini stack: store hits, the no-op memo, vendor and option
switches, incremental path sources, parallel failures, the compiler launcher, interrupts,
run reports and hand-build presets."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from builder.core.orphans import session_members
from builder.engine import memo
from tests.conftest import HAVE_NVCC, ROOT, last_report, pause_launcher, wait_for, write_launcher
from tests.standins import script

pytestmark = pytest.mark.integration


def statuses(home: Path) -> dict[str, str]:
    return {c["name"]: c["status"] for c in last_report(home)["components"]}


def log_files(home: Path) -> set[Path]:
    logs = home / "logs"
    return set(logs.rglob("*.log")) if logs.exists() else set()


# ``python -m builder`` with Ctrl-C restored: a shell starts background jobs with SIGINT ignored,
# and Python then leaves it ignored, so a suite run in the background would never see it.
WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'builder'; runpy.run_module('builder', run_name='__main__', alter_sys=True)"
)


def builder_process(*args: str | Path, home: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WITH_CTRL_C, *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "INFINI_STACK_HOME": str(home), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# --- no-op --------------------------------------------------------------------------------------


def test_second_build_is_a_store_hit_for_every_component_with_no_configure_and_no_logs(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    before = log_files(shared_home)
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    report = last_report(shared_home)
    assert all(c["status"] == "hit" and c["steps"] == {} for c in report["components"])
    assert report["totals"]["hit"] == 4
    assert log_files(shared_home) == before
    assert "configure" not in result.err


def test_noop_memo_settles_an_unchanged_build_without_planning_and_misses_after_an_edit(
    shared_home: Path,
    mini: Path,
    cli,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(memo, "RACY_NS", -(10**12))  # the copied tree is seconds old: trust it
    assert cli("build", "--manifest", mini, "--vendor", "cpu").code == 0
    assert not last_report(shared_home)["fast_path"]

    from builder.pipeline import context

    def no_planning(*args: object) -> None:
        raise AssertionError("planned although nothing changed")

    with monkeypatch.context() as m:
        m.setattr(context, "load_stack", no_planning)
        result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    report = last_report(shared_home)
    assert report["fast_path"] and report["totals"]["hit"] == 4

    # Touched, not changed: the memo no longer vouches for it, planning finds the same keys.
    source = mini.parent / "engine" / "src" / "runtime.cpp"
    source.write_text(source.read_text())
    assert cli("build", "--manifest", mini, "--vendor", "cpu").code == 0
    report = last_report(shared_home)
    assert not report["fast_path"] and report["totals"]["hit"] == 4


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host")
def test_vendor_switch_cpu_to_nvidia_and_back_rebuilds_nothing_on_the_return(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("build", "--manifest", mini, "--vendor", "cpu").code == 0
    result = cli("build", "--manifest", mini, "--vendor", "nvidia")
    assert result.code == 0, result.err
    assert set(statuses(shared_home).values()) == {"built"}
    logs = log_files(shared_home)
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert set(statuses(shared_home).values()) == {"hit"}
    assert log_files(shared_home) == logs


def test_option_switch_and_back_rebuilds_nothing_on_the_return(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    original = mini.read_text()
    mini.write_text(original.replace("MINI_OPS_OPS: add,mul,gemm", "MINI_OPS_OPS: add,gemm"))
    result = cli("build", "--manifest", mini, "--vendor", "cpu", "-c", "miniops")
    assert result.code == 0, result.err
    assert statuses(shared_home) == {"minirt": "hit", "miniops": "built"}
    logs = log_files(shared_home)
    mini.write_text(original)
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert set(statuses(shared_home).values()) == {"hit"}
    assert log_files(shared_home) == logs


# --- incremental path sources -------------------------------------------------------------------


def compiled_objects(build_log: str) -> list[str]:
    return re.findall(r"Building CXX object (\S+)", build_log)


def test_path_source_edit_rebuilds_it_and_its_dependents_only_recompiling_the_edited_file(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    edited = sorted((mini.parent / "ops" / "src" / "ops").glob("*.cpp"))[0]
    edited.write_text(edited.read_text() + "\n// first edit\n")
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert statuses(shared_home) == {
        "minirt": "hit",
        "miniops": "built",
        "miniccl": "hit",
        "minilm": "built",
    }

    runtime = mini.parent / "engine" / "src" / "runtime.cpp"
    runtime.write_text(runtime.read_text() + "\n// second edit\n")
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    assert statuses(shared_home) == {
        "minirt": "hit",
        "miniops": "hit",
        "miniccl": "hit",
        "minilm": "built",
    }
    lm = next(c for c in last_report(shared_home)["components"] if c["name"] == "minilm")
    compiled = compiled_objects(Path(lm["logs"]["build"]).read_text())
    assert compiled == ["CMakeFiles/minicore_runtime.dir/src/runtime.cpp.o"]


# --- parallel components and failures -----------------------------------------------------------


def build_with_ccl_failing(mini: Path, tmp_path: Path) -> tuple[str | Path, ...]:
    """Break MiniCCL's source; the arguments of a two-job build under a launcher that holds
    MiniRT's compiles (up to 30 s) until a MiniCCL compile has failed, so that MiniRT is still
    running when MiniCCL fails, however loaded the machine is."""
    broken = mini.parent / "ccl" / "src" / "ccl.cpp"
    broken.write_text(broken.read_text() + "\n#error broken on purpose\n")
    failed = tmp_path / "ccl-failed"
    body = f"""case "$*" in
  *mini-stack/ccl/*) "$@" || {{ rc=$?; touch {failed}; exit $rc; }}; exit 0;;
  *mini-stack/rt/*) i=0
    while [ ! -e {failed} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done;;
esac"""
    slow = write_launcher(tmp_path / "rt-waits.sh", body)
    return ("build", "--manifest", mini, "--vendor", "cpu", "--jobs", "2", "--launcher", slow)


def test_failing_component_in_a_parallel_build_is_reported_and_the_other_finishes_with_its_log(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli(*build_with_ccl_failing(mini, tmp_path))
    assert result.code == 5
    assert "component 'miniccl', step build" in result.err
    assert "[miniccl] FAILED: component 'miniccl', step build" in result.err  # as it happens
    assert "broken on purpose" in result.err
    assert "build failed: miniccl" in result.err
    report = last_report(home)
    by_name = {c["name"]: c for c in report["components"]}
    assert [by_name[n]["status"] for n in ("minirt", "miniops", "miniccl", "minilm")] == [
        "built",
        "skipped",
        "failed",
        "skipped",
    ]
    rt, ccl = by_name["minirt"], by_name["miniccl"]
    assert rt["jobs"] == 1 and ccl["jobs"] == 1  # two jobs shared by two components
    assert rt["started"] < ccl["started"] + ccl["seconds"]  # they overlapped
    assert ccl["started"] < rt["started"] + rt["seconds"]
    assert Path(rt["logs"]["build"]).is_file()
    assert "rt.cpp" in Path(rt["logs"]["build"]).read_text()
    assert "broken on purpose" in Path(ccl["logs"]["build"]).read_text()
    assert (Path(rt["prefix"]).parent / "record.json").is_file()  # MiniRT reached the store
    assert report["ok"] is False and report["error"] == "build failed: miniccl"


def test_keep_going_builds_what_does_not_depend_on_the_failure_and_says_why_the_rest_waits(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    args = build_with_ccl_failing(mini, tmp_path)  # MiniOps (needs MiniRT only) is not started
    stopped = cli(*args)
    assert stopped.code == 5
    assert statuses(home) == {
        "minirt": "built",
        "miniops": "skipped",
        "miniccl": "failed",
        "minilm": "skipped",
    }
    reasons = {c["name"]: c["error"] for c in last_report(home)["components"]}
    assert reasons["miniops"] == "not started: the build stopped at the first failure"
    assert reasons["minilm"] == "not built: needs miniccl"
    hint = "hint: `infini-stack build --keep-going` builds what does not depend on the failure"
    assert f"{hint}: miniops" in stopped.err
    kept = cli(*args, "--keep-going")
    assert kept.code == 5 and "build failed: miniccl" in kept.err
    assert statuses(home) == {
        "minirt": "hit",
        "miniops": "built",
        "miniccl": "failed",
        "minilm": "skipped",
    }
    assert re.search(r"minilm +skipped .*not built: needs miniccl", kept.err)
    assert hint not in kept.err


# --- the compiler launcher ----------------------------------------------------------------------


def test_launcher_wraps_c_cxx_and_cuda_compilers_and_is_not_part_of_the_key(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    calls = tmp_path / "calls.txt"
    launcher = write_launcher(tmp_path / "ccache", f'echo "$@" >> {calls}')
    planned = cli("plan", "--manifest", mini, "--vendor", "cpu", "-c", "minirt", "--json")
    key = json.loads(planned.out)["components"][0]["key"]
    result = cli(
        "build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt", "--launcher", launcher
    )
    assert result.code == 0, result.err
    rt = last_report(home)["components"][0]
    assert rt["key"] == key
    assert "rt.cpp" in calls.read_text()
    record = json.loads((Path(rt["prefix"]).parent / "record.json").read_text())
    configure = next(c["argv"] for c in record["commands"] if c["step"] == "configure")
    for lang in ("C", "CXX", "CUDA"):
        assert f"-DCMAKE_{lang}_COMPILER_LAUNCHER={launcher}" in configure


def test_auto_launcher_prefers_ccache_then_sccache_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.pipeline.build import launcher_for

    monkeypatch.setenv("PATH", str(tmp_path))
    assert launcher_for("auto") is None
    sccache = write_launcher(tmp_path / "sccache", "")
    assert launcher_for("auto") == str(sccache)
    ccache = write_launcher(tmp_path / "ccache", "")
    assert launcher_for("auto") == str(ccache)
    assert launcher_for("none") is None


# --- interrupts ---------------------------------------------------------------------------------


def session_alive(sid: int) -> bool:
    return bool(session_members(sid))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_stop_the_children_and_say_what_was_interrupted(
    signum: signal.Signals, home: Path, mini: Path, tmp_path: Path
) -> None:
    flag, paused = tmp_path / "pause", tmp_path / "paused"
    launcher = pause_launcher(tmp_path / "pause.sh", flag, paused)
    argv = ("build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt", "--launcher", launcher)
    flag.touch()
    p = builder_process(*argv, home=home)
    try:
        wait_for(paused)
        compiler_session = os.getsid(int(paused.read_text()))
        p.send_signal(signum)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 128 + signum
    assert f"interrupted by {signum.name} while building minirt (build step)" in err
    assert "Traceback" not in err
    assert not session_alive(compiler_session)
    assert statuses(home) == {"minirt": "interrupted"}
    assert signum.name in last_report(home)["interrupted"]
    flag.unlink()
    p = builder_process(*argv, home=home)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert statuses(home) == {"minirt": "built"}


# --- reports and reproducing by hand ------------------------------------------------------------


def test_report_command_prints_the_last_run_as_a_table_and_as_json(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("build", "--manifest", mini, "--vendor", "cpu").code == 0
    table = cli("report")
    assert table.code == 0
    assert "cpu: 0 built, 4 from the store, 0 failed" in table.out
    data = json.loads(cli("report", "--json").out)
    assert data == last_report(shared_home)


def test_presets_reproduce_a_component_build_outside_the_tool(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "hand"
    result = cli("presets", "--manifest", mini, "--vendor", "cpu", "-c", "miniops", "-o", out)
    assert result.code == 0, result.err
    assert "not in the store yet" not in result.err
    assert result.out.startswith("#!/bin/sh")
    assert "-DMINI_OPS_OPS=add,mul,gemm" in result.out
    rt_prefix = next(
        c["prefix"]
        for c in json.loads(cli("plan", "--manifest", mini, "--vendor", "cpu", "--json").out)[
            "components"
        ]
        if c["name"] == "minirt"
    )
    assert f"-DMINI_RT_ROOT={rt_prefix}" in result.out
    # An IDE reads CMakePresets.json from the source directory.
    source = tmp_path / "ops"
    shutil.copytree(mini.parent / "ops", source)
    shutil.copy(out / "CMakePresets.json", source / "CMakePresets.json")
    for argv in (
        ["cmake", "--preset", "miniops-cpu"],
        ["cmake", "--build", "--preset", "miniops-cpu"],
    ):
        subprocess.run(argv, cwd=source, check=True, capture_output=True)
    assert (out / "build" / "libminiops.so").is_file()
    shutil.rmtree(out / "build")  # configured from the copy; the script uses the original
    subprocess.run(["sh", out / "build.sh"], check=True, capture_output=True)
    assert (out / "install" / "lib" / "libminiops.so").is_file()


def test_compiler_change_configures_the_incremental_build_dir_from_scratch(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt").code == 0
    first = last_report(home)["components"][0]
    # A different compiler: a wrapper of c++.
    wrapper = script(tmp_path / "c++", f'exec {shutil.which("c++")} "$@"\n')
    monkeypatch.setenv("CXX", str(wrapper))
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt").code == 0
    second = last_report(home)["components"][0]
    assert second["key"] != first["key"] and second["status"] == "built"
    assert "configure" not in second["reused"]
    cache = (next((home / "build").glob("minirt-cpu-dev-*")) / "CMakeCache.txt").read_text()
    assert f"CMAKE_CXX_COMPILER:FILEPATH={wrapper}" in cache
    assert "The CXX compiler identification" in Path(second["logs"]["configure"]).read_text()


def test_path_source_edited_during_its_build_is_said_and_recorded_and_rebuilt_next_time(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    header = mini.parent / "rt" / "include" / "mini" / "rt.h"
    launcher = write_launcher(tmp_path / "edit.sh", f'echo "// edited" >> {header}')
    result = cli(
        "build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt", "--launcher", launcher
    )
    assert result.code == 0, result.err
    assert "changed while it was being built" in result.err
    rt = last_report(home)["components"][0]
    record = json.loads((Path(rt["prefix"]).parent / "record.json").read_text())
    assert record["source_changed_during_build"] is True
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt").code == 0
    assert last_report(home)["components"][0]["key"] != rt["key"]
    assert statuses(home) == {"minirt": "built"}
