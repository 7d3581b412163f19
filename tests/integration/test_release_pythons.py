"""`release --python A --python B`: one native build, one wheel per interpreter.

The mini stack for the interpreter the tests run under and one more (3.12, or 3.11 when the tests
run under 3.12), found as a user's would be (PATH, pyenv), in a venv with pybind11: after a plain
build, the components that do not use Python come from the store, the engine is built for the
second interpreter only, and the two wheels differ in nothing but their extension modules and
tags. (A plain build in the same home: a second build reproduces entries built under homes of
one length, and the session's shared store was built under another.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from builder.core.errors import StackError
from builder.providers.interpreters import Interpreter, find
from tests.conftest import last_report

pytestmark = pytest.mark.integration

OWN = f"{sys.version_info.major}.{sys.version_info.minor}"
OTHER = "3.11" if OWN == "3.12" else "3.12"


@pytest.fixture(scope="session")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of the second interpreter with pybind11 (the target needs its own)."""
    try:
        found: Interpreter = find(OTHER)
    except StackError as exc:
        pytest.skip(f"needs a second CPython ({OTHER}) on PATH or in pyenv: {exc.message}")
    venv = tmp_path_factory.mktemp("other-python") / "venv"
    subprocess.run([found.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pybind11"],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        pytest.skip(f"pybind11 could not be installed for {OTHER}: {pip.stderr[-300:]}")
    return venv / "bin" / "python"


def release_for(cli, mini: Path, out: Path, python: Path):  # type: ignore[no-untyped-def]
    """``release`` of the mini stack for this interpreter and ``python``."""
    return cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out, "--python", OWN,
               "--python", python)  # fmt: skip


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_release_of_two_interpreters_builds_the_native_components_once(
    home: Path,
    mini: Path,
    tmp_path: Path,
    other_python: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "release"
    own_tag, other_tag = "cp" + OWN.replace(".", ""), "cp" + OTHER.replace(".", "")
    assert cli("build", "--manifest", mini, "--vendor", "cpu").code == 0
    args = ("--manifest", mini, "--vendor", "cpu", "-o", out, "--python", OWN)
    result = cli("release", *args, "--python", other_python)
    assert result.code == 0, result.err

    # One build: the shared components once, from the store (the plain build made them); the
    # engine per interpreter, this one's a store hit too (its key is a plain build's), the
    # other's built.
    status = {c["name"]: c["status"] for c in last_report(home)["components"]}
    assert status == {
        "minirt": "hit",
        "miniops": "hit",
        "miniccl": "hit",
        f"minilm@{own_tag}": "hit",
        f"minilm@{other_tag}": "built",
    }
    assert "built once for all: minirt, miniops, miniccl; once per interpreter: minilm" in (
        result.err
    )

    # One wheel per interpreter, each with its SBOM, check log and stack manifest; one
    # SHA256SUMS over all of them.
    wheels = sorted(out.glob("*.whl"))
    assert [w.name.split("-")[2] for w in wheels] == sorted([own_tag, other_tag])
    names = {p.name for p in out.iterdir()}
    for wheel in wheels:
        tag = wheel.name.split("-")[2]
        stem = wheel.name.removesuffix(".whl")
        assert {f"{stem}.cdx.json", f"check-{tag}.log", f"stack-manifest-{tag}.json"} <= names
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert {line.split("  ")[1] for line in sums} == names - {"SHA256SUMS"}

    # Every stage of each wheel ran for it, with its own interpreter; the proof covered both.
    stages = json.loads((out / "release-report.json").read_text())["steps"]
    for tag in (own_tag, other_tag):
        assert stages[f"check {tag}"]["ran"] is True
        assert {f"wheel {tag}", f"smoke {tag}", f"sbom {tag}"} <= set(stages)
    assert stages[f"smoke {other_tag}"]["python"] == str(other_python)
    assert sorted(stages["verify"]["wheels"]) == [w.name for w in wheels]

    # report --trace: the other interpreter's engine, built, in lanes of its own, and each
    # interpreter's check children.
    trace = tmp_path / "trace.json"
    assert cli("report", "--trace", trace).code == 0
    events = json.loads(trace.read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(lane.startswith(f"{other_tag} slot ") for lane in lanes)
    assert not any(lane.startswith(f"{own_tag} slot ") for lane in lanes)  # (a store hit)
    assert {f"check {own_tag} child 1", f"check {other_tag} child 1"} <= lanes

    # The two wheels differ only in their extension modules and tags (WHEEL, RECORD, the
    # metadata naming the build of each, and the dist-info's name).
    a, b = (members(w) for w in wheels)
    assert sorted(n for n in a if n.endswith(".so") and "cpython" in n) != sorted(
        n for n in b if n.endswith(".so") and "cpython" in n
    )
    common = {n for n in a if "cpython" not in n and ".dist-info/" not in n}
    assert common == {n for n in b if "cpython" not in n and ".dist-info/" not in n}
    assert all(a[n] == b[n] for n in common), [n for n in common if a[n] != b[n]]


def test_a_second_interpreter_without_pybind11_stops_at_preflight_with_the_pip_line(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    venv = tmp_path / "bare"
    try:
        found = find(OTHER)
    except StackError as exc:
        pytest.skip(f"needs a second CPython ({OTHER}): {exc.message}")
    subprocess.run([found.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    result = release_for(cli, mini, tmp_path / "out", python)
    assert result.code == 3, result.err
    assert f"for Python {found.version} ({python})" in result.err
    assert f"{python} -m pip install pybind11" in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "out").exists()


def test_an_interpreter_without_pytest_stops_at_preflight_where_its_engine_runs_a_suite(
    home: Path,
    mini: Path,
    tmp_path: Path,
    other_python: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """The engine built for each interpreter runs its own suite with that interpreter, after
    its compile: an interpreter without pytest is a preflight failure with the pip line, before
    anything compiles (the other venv has pybind11 only)."""
    recipe = mini.parent / "components" / "minilm.yaml"
    recipe.write_text(recipe.read_text() + "test:\n  pytest: []\n  select: [python]\n")
    result = release_for(cli, mini, tmp_path / "out", other_python)
    assert result.code == 3, result.err
    assert f"pytest and pytest-xdist are not both installed for {other_python}" in result.err
    assert "which runs the suite of minilm after its build" in result.err
    assert f"{other_python} -m pip install 'pytest>=8' 'pytest-xdist>=3'" in result.err
    assert "Traceback" not in result.err
    assert not list((home / "store").glob("*/prefix"))  # nothing was built
    assert not (tmp_path / "out").exists()
