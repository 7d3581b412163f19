"""The no-op fast path: what a memo checks, what invalidates it, and what a settled build writes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builder import noop
from builder.core.layout import Layout
from builder.engine import memo
from builder.engine.report import ComponentResult, RunReport
from builder.engine.store import RECORD
from builder.plan import COMPILER_ENV
from tests import planning
from tests.conftest import ROOT

ARGV = ("build", "--vendor", "cpu")


def memo_of(files: list[str], links: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "format": noop.FORMAT,
        "request": noop.request(ARGV, "/w"),
        "env": {},
        "cpus": os.cpu_count(),
        "files": [(f, noop.signature(f)) for f in files],
        "links": links or {},
        "records": [],
        **more,
    }


def holds(data: dict[str, Any], env: dict[str, str] | None = None) -> bool:
    return noop.holds(data, ARGV, "/w", env or {})


def test_memo_holds_while_files_are_unchanged_and_not_after_an_edit(tmp_path: Path) -> None:
    f = tmp_path / "a.cpp"
    f.write_text("int a;\n")
    data = memo_of([str(f)])
    assert holds(data)
    f.write_text("int b;\n")
    assert not holds(data)


def test_memo_notices_a_file_appearing_in_a_tree(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.cpp").write_text("int a;\n")
    data = memo_of(memo.tree_paths(tmp_path))
    assert holds(data)
    (tmp_path / "src" / "b.cpp").write_text("int b;\n")
    assert not holds(data)


def test_memo_notices_a_swapped_symlink(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    (tmp_path / "src").symlink_to("one")
    links = memo.link_chain(tmp_path / "src" / "x")
    assert links == {str(tmp_path / "src"): "one"}
    data = memo_of([], links)
    assert holds(data)
    (tmp_path / "src").unlink()
    (tmp_path / "src").symlink_to("two")
    assert not holds(data)


def test_link_chain_follows_links_inside_link_targets(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "mid").symlink_to(tmp_path / "real")
    (tmp_path / "top").symlink_to("mid")
    assert memo.link_chain(tmp_path / "top" / "f") == {
        str(tmp_path / "top"): "mid",
        str(tmp_path / "mid"): str(tmp_path / "real"),
    }


def test_memo_is_void_for_another_command_line_directory_or_missing_entry(tmp_path: Path) -> None:
    data = memo_of([])
    assert not noop.holds(data, ("build", "--vendor", "nvidia"), "/w", {})
    assert not noop.holds(data, ARGV, "/elsewhere", {})
    record = tmp_path / "entry" / RECORD
    data["records"] = [str(record)]
    assert not holds(data)  # the store entry was collected
    record.parent.mkdir()
    record.write_text("{}")
    assert holds(data)


def test_memo_env_covers_compiler_flags_and_tool_paths_but_not_the_terminal() -> None:
    data = memo_of([], env={"PATH": "/usr/bin"})
    base = {"PATH": "/usr/bin", "TERM": "xterm", "OLDPWD": "/tmp", "SHLVL": "2"}
    assert holds(data, base)
    for name in ("CXXFLAGS", "NCCL_ROOT", "CUDA_HOME", "CMAKE_PREFIX_PATH", "INFINI_STACK_STORE"):
        assert not holds(data, {**base, name: "x"}), name
    assert not holds(data, {**base, "PATH": "/opt/bin:/usr/bin"})


@pytest.mark.parametrize("name", COMPILER_ENV)
def test_every_variable_planning_keys_on_is_one_the_memo_compares(name: str) -> None:
    assert name in noop.build_env({name: "x"})


def test_home_of_follows_the_flag_then_the_environment(tmp_path: Path) -> None:
    env = {"INFINI_STACK_HOME": str(tmp_path / "env")}
    assert noop.home_of(("build",), env) == str(tmp_path / "env")
    assert noop.home_of(("build", "--home", str(tmp_path / "a")), env) == str(tmp_path / "a")
    assert noop.home_of(("build", f"--home={tmp_path / 'b'}"), env) == str(tmp_path / "b")
    assert noop.home_of(("build",), {"XDG_CACHE_HOME": str(tmp_path)}) == str(
        tmp_path / "infini-stack"
    )
    assert Layout.from_env(env).home == Path(noop.home_of(("build",), env))


def test_settle_declines_what_is_not_a_plain_build(tmp_path: Path) -> None:
    env = {"INFINI_STACK_HOME": str(tmp_path)}
    for argv in ((), ("plan",), ("build", "--no-memo"), ("build", "--help"), ("build", "-h")):
        assert noop.settle(argv, env) is None


def test_a_corrupt_memo_is_declined_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ("build", "--home", str(tmp_path))
    path = Path(noop.memo_file(str(tmp_path), argv, str(tmp_path)))
    path.parent.mkdir(parents=True)
    for junk in (b"", b"\x00garbage", b"{not marshal"):
        path.write_bytes(junk)
        assert noop.settle(argv, {}) is None
    noop.save(str(path), {"format": noop.FORMAT})  # the right format, the keys missing
    assert noop.settle(argv, {}) is None


# --- leaving a memo, then settling from it ------------------------------------------------------


def stored_plan(tmp_path: Path) -> tuple[Layout, Any, RunReport]:
    """The real stack's cpu plan, its entries present in a store under ``tmp_path``."""
    layout = Layout.from_env({}, home=tmp_path / "home")
    plan = planning.plan_for("cpu")
    for c in plan.components:
        entry = layout.entry(c.key)
        entry.mkdir(parents=True)
        (entry / RECORD).write_text("{}")
    report = RunReport(command="build", vendor="cpu", manifest=str(plan.stack.file), ok=True)
    report.components = [
        dataclasses.replace(
            ComponentResult(name=c.name, key=c.key, status="built", seconds=3.0),
            prefix=str(c.prefix),
        )
        for c in plan.components
    ]
    return layout, plan, report


def test_memo_is_not_left_when_a_file_is_too_recent_to_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    layout, plan, report = stored_plan(tmp_path)
    argv = ("build", "--home", str(layout.home))
    fresh = tmp_path / "fresh"
    fresh.write_text("x")
    host = planning.host()
    left = memo.leave(
        argv, layout, plan, host, report, since_ns=time.time_ns(), extra_files=[str(fresh)]
    )
    assert not left
    assert not Path(noop.memo_file(str(layout.home), argv, str(tmp_path))).exists()


def test_a_left_memo_settles_the_same_build_with_a_valid_run_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    layout, plan, report = stored_plan(tmp_path)
    argv = ("build", "--home", str(layout.home))
    since = time.time_ns() + 2 * memo.RACY_NS  # the entries were written just now: trust them
    assert memo.leave(argv, layout, plan, planning.host(), report, since_ns=since)

    assert noop.settle(argv, {}) == 0
    data = json.loads((layout.runs() / "last.json").read_text())
    assert data["fast_path"] and data["ok"]
    assert [c["status"] for c in data["components"]] == ["hit"] * len(plan.components)
    assert data["totals"]["hit"] == len(plan.components) and data["totals"]["build_seconds"] == 0
    assert isinstance(data["started"], float) and 0 <= data["seconds"] < 5
    err = capsys.readouterr().err
    assert f"cpu: 0 built, {len(plan.components)} from the store, 0 failed in " in err
    assert "run report: " in err

    assert noop.settle(argv, {"CXXFLAGS": "-O0"}) is None  # what the compiler reads changed
    victim = layout.entry(plan.components[-1].key) / RECORD
    victim.unlink()
    assert noop.settle(argv, {}) is None  # an entry was collected: the full path rebuilds it


def test_settling_imports_nothing_but_the_memo_check(tmp_path: Path) -> None:
    """What makes the fast path fast: nothing but the entry point and the memo check is imported
    before it answers (not even contextlib, which brings collections and functools)."""
    code = (
        "import sys; import builder.__main__; from builder import noop; noop.settle(['build']); "
        "NAMES = {'builder', 'argparse', 'json', 're', 'pathlib', 'typing', 'contextlib', "
        "'collections', 'functools'}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in NAMES))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "INFINI_STACK_HOME": str(tmp_path)},
    )
    assert out.stdout.strip() == "['builder', 'builder.__main__', 'builder.noop']"
