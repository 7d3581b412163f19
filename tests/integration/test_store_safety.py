"""The store under stress on the real mini stack: concurrent builds, builds SIGKILLed at every
stage, and garbage collection."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from builder.core.layout import Layout
from builder.core.orphans import session_members as orphans_of
from builder.engine.store import Store
from tests.conftest import MINI, ROOT, last_report, pause_launcher, wait_for

pytestmark = pytest.mark.integration


def visible(directory: Path) -> list[str]:
    return (
        sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
        if directory.exists()
        else []
    )


def build_cmd(manifest: Path, *extra: str | Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "builder",
        "build",
        "--manifest",
        str(manifest),
        "--vendor",
        "cpu",
        *map(str, extra),
    ]


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "INFINI_STACK_HOME": str(home), **extra}


def assert_store_consistent(store_root: Path) -> list[dict[str, Any]]:
    """Every visible directory is a complete entry whose record names its own key."""
    records = []
    for name in visible(store_root):
        record = json.loads((store_root / name / "record.json").read_text())
        assert record["key"].startswith(name)
        for output in record["outputs"]:
            assert (store_root / name / "prefix" / output).exists()
        records.append(record)
    return records


# --- two builds at once -------------------------------------------------------------------------


def test_two_concurrent_builds_into_one_store_leave_one_consistent_entry_per_key(
    tmp_path: Path, mini: Path
) -> None:
    store = tmp_path / "shared-store"
    procs = [
        subprocess.Popen(
            build_cmd(mini, "--store", store, "--jobs", "1"),
            cwd=ROOT,
            env=env_for(tmp_path / f"home{i}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    records = assert_store_consistent(store)
    assert sorted(r["name"] for r in records) == ["miniccl", "minilm", "miniops", "minirt"]
    reports = [last_report(tmp_path / f"home{i}") for i in (1, 2)]
    for name in ("minirt", "miniops", "miniccl", "minilm"):
        outcome = sorted(
            next(c["status"] for c in r["components"] if c["name"] == name) for r in reports
        )
        assert outcome == ["built", "hit"], name  # built once, found by the other
    assert visible(store / ".incoming") == []


# --- SIGKILL at every stage ---------------------------------------------------------------------

# Runs the CLI in a subprocess after patching a stage to SIGKILL the process right there.
KILLER = textwrap.dedent("""
    import os, signal, sys
    from builder.engine import component as build
    from builder.engine import store
    from builder.cli import main
    stage = os.environ["KILL_AT"]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if stage == "after-configure-before-stamp":
        real_done = build.Progress.step_done
        def step_done(self, component, step, seconds):
            real_done(self, component, step, seconds)
            if step == "configure":
                die()
        build.Progress.step_done = step_done
    elif stage == "after-configure":
        real_write = build.atomic_write
        def write(path, text, **kw):
            real_write(path, text, **kw)
            if path.name == build.STAMP:
                die()
        build.atomic_write = write
    elif stage == "before-record":
        store.write_record = lambda directory, record: die()
    elif stage == "after-record-before-rename":
        real_record = store.write_record
        def write_record(directory, record):
            real_record(directory, record)
            die()
        store.write_record = write_record
    sys.exit(main(sys.argv[1:]))
""")


def stage_pause_in_compile(mini: Path, flag: Path, paused: Path) -> list[str]:
    return ["--launcher", str(pause_launcher(mini.parent / "pause-launcher.sh", flag, paused))]


def stage_pause_in_install(mini: Path, flag: Path, paused: Path) -> list[str]:
    """MiniRT's install stops after its library and before its headers and CMake files."""
    cmake = mini.parent / "rt" / "CMakeLists.txt"
    text = cmake.read_text()
    marker = "install(FILES include/mini/rt.h"
    assert marker in text
    pause = (
        f'install(CODE "if(EXISTS {flag})\n'
        f'  execute_process(COMMAND sh -c \\"echo $$ > {paused}.tmp; '
        f'mv {paused}.tmp {paused}; exec sleep 60\\")\n'
        'endif()")\n'
    )
    cmake.write_text(text.replace(marker, pause + marker, 1))
    return []


@pytest.mark.parametrize(
    "stage",
    [
        "after-configure-before-stamp",
        "after-configure",
        "mid-compile",
        "mid-install",
        "before-record",
        "after-record-before-rename",
    ],
)
def test_build_killed_with_sigkill_leaves_no_partial_entry_and_the_next_build_succeeds(
    stage: str, home: Path, mini: Path, tmp_path: Path
) -> None:
    flag, paused = tmp_path / "pause", tmp_path / "paused"
    extra: list[str] = []
    if stage == "mid-compile":
        extra = stage_pause_in_compile(mini, flag, paused)
    elif stage == "mid-install":
        extra = stage_pause_in_install(mini, flag, paused)
    argv = [*build_cmd(mini, "-c", "minirt", *extra)[3:]]
    env = env_for(home, KILL_AT=stage)
    orphans = None
    if stage.startswith("mid-"):
        flag.touch()
        p = subprocess.Popen(
            [sys.executable, "-m", "builder", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(paused)
            orphans = os.getsid(int(paused.read_text()))
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(30)
        flag.unlink()
        assert orphans_of(orphans)  # its children run on: they have sessions of their own
        if stage == "mid-install":
            staged = list((home / "store" / ".incoming").glob("*/prefix/lib/libminirt.so"))
            assert staged and not list((home / "store" / ".incoming").glob("*/prefix/include"))
    else:
        p = subprocess.run(
            [sys.executable, "-c", KILLER, *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == -signal.SIGKILL, p.stderr
    store_root = home / "store"
    assert visible(store_root) == []  # no partial entry
    assert Store(Layout.from_env({}, home=home)).entries() == []
    if stage == "after-configure-before-stamp":
        # A half-written CMake cache, as a configure killed while writing it leaves.
        cache = next((home / "build").glob("minirt-*/CMakeCache.txt"))
        cache.write_text(cache.read_text()[: len(cache.read_text()) // 2])

    again = subprocess.run(
        [sys.executable, "-m", "builder", *argv],
        cwd=ROOT,
        check=False,
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    (record,) = assert_store_consistent(store_root)
    assert record["name"] == "minirt"
    assert visible(store_root / ".incoming") == []
    assert last_report(home)["components"][0]["status"] == "built"
    if orphans is not None:  # the next build stopped what the killed one left running
        assert not orphans_of(orphans)


# --- gc -----------------------------------------------------------------------------------------


@pytest.fixture
def cluttered(shared_home: Path, mini: Path, cli) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """The session's cpu store, plus an entry no manifest names and what killed builds leave."""
    rt = mini.parent / "rt" / "src" / "rt.cpp"
    rt.write_text(rt.read_text() + "\n// an old revision\n")
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "-c", "minirt").code == 0
    stale_key = last_report(shared_home)["components"][0]["key"]
    store = shared_home / "store"
    (store / ".incoming" / ("0" * 32) / "prefix").mkdir(parents=True)
    (store / ".doomed-1234-99").mkdir()
    old_logs = shared_home / "logs" / "20200101-000000-cpu-999999999"
    old_logs.mkdir(parents=True)
    (old_logs / "build.log").write_text("old\n")
    return {
        "stale": store / stale_key[:32],
        "old_logs": old_logs,
        "stale_build": next((shared_home / "build").glob("minirt-cpu-dev-*")),
    }


def snapshot(home: Path) -> list[str]:
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if "locks" not in p.parts and "cache" not in p.parts
    )


def test_gc_removes_what_no_manifest_uses_and_keeps_every_entry_the_manifest_needs(
    shared_home: Path,
    cluttered: dict[str, Path],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    store = shared_home / "store"
    needed = set(visible(store)) - {cluttered["stale"].name}
    assert len(needed) == 4
    result = cli("gc", "--manifest", MINI / "stack.yaml")
    assert result.code == 0, result.err
    assert set(visible(store)) == needed
    assert visible(store / ".incoming") == []
    assert not (store / ".doomed-1234-99").exists()
    assert not cluttered["old_logs"].exists()
    assert not cluttered["stale_build"].exists()
    assert f"removed store entry (minirt, cpu): {cluttered['stale']}" in result.out
    assert "freed" in result.out
    # The manifest's own build still finds everything.
    assert cli("build", "--manifest", MINI / "stack.yaml", "--vendor", "cpu").code == 0
    assert {c["status"] for c in last_report(shared_home)["components"]} == {"hit"}


def test_gc_dry_run_prints_what_it_would_remove_and_removes_nothing(
    shared_home: Path,
    cluttered: dict[str, Path],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    before = snapshot(shared_home)
    result = cli("gc", "--manifest", MINI / "stack.yaml", "--dry-run")
    assert result.code == 0, result.err
    assert f"would remove store entry (minirt, cpu): {cluttered['stale']}" in result.out
    assert "would free" in result.out
    assert snapshot(shared_home) == before


def test_gc_keeps_an_entry_whose_build_holds_its_lock(
    shared_home: Path,
    cluttered: dict[str, Path],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    layout = Layout.from_env({}, home=shared_home)
    record = json.loads((cluttered["stale"] / "record.json").read_text())
    with Store(layout).lock(record["key"]):
        result = cli("gc", "--manifest", MINI / "stack.yaml")
    assert result.code == 0, result.err
    assert f"kept store entry (minirt, cpu) in use: {cluttered['stale']}" in result.out
    assert cluttered["stale"].exists()
