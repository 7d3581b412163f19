"""`release --index ROOT`: the mini stack's wheel in a per-vendor index that pip installs from
over HTTP (python -m http.server on loopback), and a second release merged into the same tree.

Two releases of the mini stack (0.1.0 and 0.2.0, cpu) are made once for the module, both into
one index tree; the state of the tree between them is recorded for the merge test."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.core.errors import UsageError
from builder.pipeline.publish import index_release
from tests.conftest import MINI

pytestmark = pytest.mark.integration

PROJECT = "infini-mini"


@dataclass(frozen=True)
class Tree:
    root: Path
    releases: tuple[Path, Path]
    first: dict[str, tuple[int, int, bytes]]  # file -> (inode, mtime_ns, bytes) after release 1


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def release(home: Path, manifest: Path, out: Path, index: Path) -> None:
    env = {**os.environ, "INFINI_STACK_HOME": str(home)}
    argv = [sys.executable, "-m", "builder", "release", "--manifest", str(manifest)]
    argv += ["--vendor", "cpu", "-o", str(out), "--no-verify", "--index", str(index)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def tree(built_cpu_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Tree:
    base = tmp_path_factory.mktemp("index")
    home = base / "home"
    shutil.copytree(built_cpu_store, home / "store", symlinks=True)
    stack = base / "mini-stack"
    shutil.copytree(MINI, stack)
    root = base / "www"
    release(home, stack / "stack.yaml", base / "rel-0.1.0", root)
    first = snapshot(root)
    manifest = stack / "stack.yaml"
    text = manifest.read_text()
    assert "  version: 0.1.0\n" in text
    manifest.write_text(text.replace("  version: 0.1.0\n", "  version: 0.2.0\n"))
    release(home, manifest, base / "rel-0.2.0", root)
    return Tree(root, (base / "rel-0.1.0", base / "rel-0.2.0"), first)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def listening(argv: list[str], port: int, log: Path, cwd: Path | None = None) -> Iterator[str]:
    """A server process started with ``argv``, once it accepts on ``port``: its URL. What it
    prints (its request log) goes to ``log``."""
    with log.open("w") as out:
        server = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{argv[:4]} did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def served(root: Path, log: Path) -> contextlib.AbstractContextManager[str]:
    """``python -m http.server`` over ``root`` on loopback."""
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    return listening(argv, port, log, cwd=root)


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with pip (ensurepip's, offline) and nothing else."""
    target = tmp_path_factory.mktemp("venv") / "v"
    venv.create(target, with_pip=True)
    return target / "bin" / "python"


def pip_install(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pip with no configuration of this machine (its find-links and indexes): only loopback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    argv = [str(python), "-m", "pip", "install", "--no-cache-dir", "--retries", "0"]
    argv += ["--timeout", "10", "--force-reinstall", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def installed_version(python: Path) -> str:
    code = f"import importlib.metadata as m; print(m.version({PROJECT!r}))"
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_pip_installs_the_release_from_its_cpu_index_with_hashes_and_pep658_metadata(
    tree: Tree, fresh_python: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with served(tree.root, log) as url:
        done = pip_install(fresh_python, "--index-url", f"{url}/cpu/simple", PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed_version(fresh_python) == "0.2.0+cpu"  # the newer of the two releases
    requests = log.read_text()
    # pip read the project page, took the metadata file (PEP 658) and then the wheel
    assert f"GET /cpu/simple/{PROJECT}/ HTTP" in requests
    assert 'linux_x86_64.whl.metadata HTTP/1.1" 200' in requests
    assert 'linux_x86_64.whl HTTP/1.1" 200' in requests


def test_pip_finds_the_release_through_extra_index_url(
    tree: Tree, fresh_python: Path, tmp_path: Path
) -> None:
    empty = tree.root / "empty" / "simple"  # a main index that has no such project
    empty.mkdir(parents=True, exist_ok=True)
    with served(tree.root, tmp_path / "server.log") as url:
        done = pip_install(
            fresh_python,
            "--index-url",
            f"{url}/empty/simple",
            "--extra-index-url",
            f"{url}/cpu/simple",
            f"{PROJECT}==0.1.0+cpu",
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed_version(fresh_python) == "0.1.0+cpu"


def test_second_release_merges_into_the_tree_without_rewriting_published_files(
    tree: Tree,
) -> None:
    now = snapshot(tree.root)
    pages = {"index.html", "index.json"}
    published = {name: state for name, state in tree.first.items() if Path(name).name not in pages}
    assert len(published) == 2  # release 1's wheel and its metadata file
    for name, state in published.items():
        assert now[name] == state, f"{name} was rewritten"
    project = tree.root / "cpu" / "simple" / PROJECT
    wheels = sorted(p.name for p in project.glob("*.whl"))
    assert [w.split("-")[1] for w in wheels] == ["0.1.0+cpu", "0.2.0+cpu"]
    for release_dir in tree.releases:
        (wheel,) = release_dir.glob("*.whl")
        assert (project / wheel.name).read_bytes() == wheel.read_bytes()
    page = json.loads((project / "index.json").read_text())
    assert page["versions"] == ["0.1.0+cpu", "0.2.0+cpu"]
    assert [f["filename"] for f in page["files"]] == wheels
    html = (project / "index.html").read_text()
    assert all(w.replace("+", "%2B") in html for w in wheels)
    assert html.count('data-requires-python="&gt;=3.8"') == 2
    root_page = json.loads((tree.root / "cpu" / "simple" / "index.json").read_text())
    assert root_page["projects"] == [{"name": PROJECT}]


def test_a_different_file_under_a_published_name_is_refused_and_nothing_is_written(
    tree: Tree, tmp_path: Path
) -> None:
    (wheel,) = tree.releases[0].glob("*.whl")
    before = snapshot(tree.root)
    forged = tmp_path / wheel.name
    forged.write_bytes(wheel.read_bytes() + b"\0")  # still a zip: the central directory is read
    with pytest.raises(UsageError) as caught:
        index_release(tree.root, [forged])
    assert "already publishes other files" in caught.value.message
    assert wheel.name in caught.value.message
    assert snapshot(tree.root) == before
    assert index_release(tree.root, [wheel]) == []  # the same bytes again: nothing to write
    assert snapshot(tree.root).keys() == before.keys()
