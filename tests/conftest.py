"""Shared fixtures: an isolated state home, a copy of the mini stack, a CLI runner.

Integration tests build the bundled mini stack for real; one session-wide store holds the cpu
build so that tests needing a built stack reuse it (a store hit costs nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from builder.cli import main
from tests.standins import script

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "examples" / "mini-stack"
HAVE_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()


def pytest_report_header() -> list[str]:
    def version(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
        except OSError:
            return "absent"
        return out.splitlines()[0] if out else "absent"

    return [
        f"cmake: {version(['cmake', '--version'])}",
        f"ninja: {version(['ninja', '--version'])}",
        f"c++: {version(['c++', '--version'])}",
        f"nvcc: {'present' if HAVE_NVCC else 'absent'}",
    ]


def differential_runner() -> ModuleType:
    """benchmarks/differential.py, the differential run, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "differential", ROOT / "benchmarks/differential.py"
    )
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault("differential", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)  # registered first: its dataclasses look themselves up
    return module


def last_report(home: Path) -> dict[str, Any]:
    """The run report of the last command run with INFINI_STACK_HOME=``home``."""
    data: dict[str, Any] = json.loads((home / "runs" / "last.json").read_text())
    return data


def wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def write_launcher(path: Path, body: str) -> Path:
    """A compiler launcher script: ``body`` runs first, then the compiler command."""
    return script(path, f'{body}\nexec "$@"\n')


def pause_launcher(path: Path, flag: Path, paused: Path) -> Path:
    """A launcher that, while ``flag`` exists, writes its pid to ``paused`` and sleeps a minute
    before compiling: a build held mid-compile, for a test to interrupt."""
    return write_launcher(
        path, f"[ -e {flag} ] && {{ echo $$ > {paused}.$$; mv {paused}.$$ {paused}; sleep 60; }}"
    )


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run ``infini-stack ARGS`` in-process; returns exit code and captured output."""

    def run(*args: str | Path) -> CliResult:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def without_host_site_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit looks for other distributions on sys.path only, not in this interpreter's own
    site-packages: a test's stand-in torch on sys.path is found as a PYTHONPATH install is,
    whether or not a real torch is installed where the tests run (a developer's venv often
    has one, and the audit looks in site-packages first)."""
    import site

    from wheels.audit import ldso

    own = {Path(p) for p in (*site.getsitepackages(), site.getusersitepackages())}

    def on_sys_path() -> tuple[Path, ...]:
        dirs = (Path(p) for p in sys.path if p)
        return tuple(dict.fromkeys(d for d in dirs if d.is_dir() and d not in own))

    monkeypatch.setattr(ldso, "site_dirs", on_sys_path)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private INFINI_STACK_HOME for one test."""
    path = tmp_path / "home"
    monkeypatch.setenv("INFINI_STACK_HOME", str(path))
    monkeypatch.delenv("INFINI_STACK_STORE", raising=False)
    return path


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    """A private copy of the bundled mini stack (its stack.yaml inside)."""
    target = tmp_path / "mini-stack"
    shutil.copytree(MINI, target)
    return target / "stack.yaml"


@pytest.fixture(scope="session")
def built_cpu_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the cpu build of the bundled mini stack, built once per session."""
    home = tmp_path_factory.mktemp("session-home")
    env = {**os.environ, "INFINI_STACK_HOME": str(home)}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "build",
            "--manifest",
            str(MINI / "stack.yaml"),
            "--vendor",
            "cpu",
        ],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
    )
    return home / "store"


@pytest.fixture
def shared_home(built_cpu_store: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private home whose store starts as a copy of the session's built cpu store."""
    shutil.copytree(built_cpu_store, home / "store", symlinks=True)
    return home


@pytest.fixture
def chdir_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real registry (Debian's docker-registry) on loopback, for the remote cache's tests."""
    from tests.registry import Registry, registry_binary

    if registry_binary() is None:
        pytest.skip("no registry binary: apt-get install -y docker-registry")
    reg = Registry(tmp_path / "registry").start()
    yield reg
    reg.stop()


def require_in_wheel(manifest: Path, *requirements: str) -> None:
    """The mini stack's wheel (``manifest``) made to declare ``requirements`` (Requires-Dist)."""
    listed = ", ".join(f'"{r}"' for r in requirements)
    text = manifest.read_text()
    anchor = 'requires_python: ">=3.8"'
    manifest.write_text(text.replace(anchor, f"{anchor}\n  requires: [{listed}]"))
