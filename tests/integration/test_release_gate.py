"""`infini-stack release`: the gate writes wheel, SBOM, SHA256SUMS and reports, or nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from builder.pipeline import sbom
from builder.pipeline.build_manifest import read_from_wheel
from builder.pipeline.release import sbom_of
from tests.conftest import require_in_wheel
from tests.standins import compile_library

pytestmark = pytest.mark.integration

STRAY = """
# Links a library that is neither bundled nor supplied by the vendor: the audit must refuse it.
target_link_libraries(minicore_runtime PRIVATE {lib})
"""
STRAY_USE = """
extern "C" int stray(void);
int minicore_stray_probe() { return stray(); }
"""


def test_release_writes_the_wheel_its_sbom_sha256sums_and_the_run_reports(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out)
    assert result.code == 0, result.err
    assert result.out.strip() == str(out)
    (wheel,) = out.glob("*.whl")
    stem = wheel.name.removesuffix(".whl")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            wheel.name,
            f"{stem}.cdx.json",
            "stack-manifest.json",
            "SHA256SUMS",
            "build-report.json",
            "release-report.json",
            "check.log",
        ]
    )
    # SHA256SUMS is in `sha256sum -c` format and covers every other file.
    lines = (out / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split("  ") for line in lines)}
    assert set(sums) == {p.name for p in out.iterdir()} - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    check = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, check=False
    )
    assert check.returncode == 0
    report = json.loads((out / "release-report.json").read_text())
    assert report["ok"] is True
    assert list(report["steps"]) == [
        "preflight",
        "build",
        "wheel",
        "smoke",
        "check",
        "verify",
        "sbom",
    ]
    assert report["steps"]["smoke"]["complete"] is True
    # `report` and `report --trace` show the release's stages with their times.
    shown = cli("report")
    assert "release --vendor cpu" in shown.out and ": ok" in shown.out.splitlines()[0]
    assert [line.split()[0] for line in shown.out.split("stage ")[-1].splitlines()[1:]] == list(
        report["steps"]
    )
    # ... and the release against its bound: CPU-seconds, cores, CPU work / cores, wall.
    bound = [line for line in shown.out.splitlines() if line.startswith("release: ")]
    assert len(bound) == 1 and "CPU-seconds on" in bound[0] and "x the bound" in bound[0]
    figures = json.loads((shared_home / "runs" / "last.json").read_text())["release"]["cpu"]
    assert figures["bound_seconds"] == round(figures["cpu_seconds"] / figures["cores"], 3)
    # The first build came from the store: the proof ran beside the smoke test and the check.
    assert report["steps"]["verify"]["beside"] is True
    trace_file = tmp_path / "trace.json"
    assert cli("report", "--trace", trace_file).code == 0
    events = json.loads(trace_file.read_text())["traceEvents"]
    stages = [e["name"] for e in events if e.get("cat") == "release"]
    assert stages == list(report["steps"])
    # The check's children are lanes of their own, one slice per child.
    children = [e for e in events if e.get("cat") == "check"]
    assert len(children) == len(report["steps"]["check"]["children"]) == 7
    assert {e["name"].split()[0] for e in children} == {"case"}
    # The cpu vendor's device is the host: the mini stack's runtime check ran, and passed.
    assert report["steps"]["check"]["ran"] is True and report["steps"]["check"]["ok"] is True
    assert '"check": "summary", "ok": true' in (out / "check.log").read_text()
    # The SBOM beside the wheel is the one inside it, valid, naming each component's hash.
    document = (out / f"{stem}.cdx.json").read_text()
    assert document == sbom_of(wheel)
    # So is the build's manifest: this wheel, from pins (the mini stack's path sources).
    manifest = (out / "stack-manifest.json").read_text()
    assert manifest == read_from_wheel(wheel)
    assert json.loads(manifest)["wheel"] == wheel.name
    assert json.loads(manifest)["worktrees"] == []
    assert sbom.validate(document) == []
    build = json.loads((out / "build-report.json").read_text())
    versions = sbom.component_versions(document)
    assert set(versions) == {"minirt", "miniops", "miniccl", "minilm"}
    for component in build["components"]:
        name = component["name"]
        record = json.loads(
            (shared_home / "store" / component["key"][:32] / "record.json").read_text()
        )
        assert versions[name] == "sha256:" + record["source_id"].removeprefix("path:")


def test_a_cold_release_checks_the_wheel_while_its_second_build_runs_then_proves_it(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """Cold, the second build starts beside the first; the proof is the stage after the check,
    so the smoke test and the check do not wait for the second build."""
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out)
    assert result.code == 0, result.err
    assert "beside the first build" in result.err
    report = json.loads((out / "release-report.json").read_text())
    stages = list(report["steps"])
    assert stages.index("check") < stages.index("verify") < stages.index("sbom")
    assert report["steps"]["verify"] == {
        **report["steps"]["verify"],
        "ok": True,
        "identical": True,
        "beside": True,
    }
    began = {name: step["at"] for name, step in report["steps"].items()}
    assert began["wheel"] <= began["smoke"] <= began["check"] <= began["verify"]


def test_release_leaves_the_output_directory_empty_when_the_audit_fails(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stray = tmp_path / "stray"
    stray.mkdir()
    lib = compile_library(
        stray / "libstray.so.1", "int stray(void) { return 7; }\n", soname="libstray.so.1"
    )
    cmake = mini.parent / "engine" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + STRAY.format(lib=lib))
    runtime = mini.parent / "engine" / "src" / "runtime.cpp"
    runtime.write_text(runtime.read_text() + STRAY_USE)
    out = tmp_path / "release"
    out.mkdir()
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out, "--no-verify")
    assert result.code == 6, result.err
    assert "the wheel failed its audit" in result.err
    assert "libstray.so.1" in result.err
    assert list(out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".release.")] == []
    # What the release made is kept beside it, and the error says where.
    kept = tmp_path / "release.failed"
    assert f"what this release made is kept in {kept}" in result.err
    (wheel,) = (kept / "wheels" / "first").glob("*.whl")
    assert zipfile.is_zipfile(wheel)
    report = json.loads((kept / "release-report.json").read_text())
    assert report["ok"] is False
    assert (report["failed_stage"], report["exit_code"]) == ("wheel", 6)
    assert report["steps"]["wheel"]["ok"] is False
    assert {p.name for p in (kept / "logs").iterdir()} >= {
        "build-report.json",
        "minilm-build.log",
    }
    # The run report tells the truth: the release failed, at which stage, with which code.
    shown = cli("report")
    assert shown.code == 0, shown.err
    assert "release --vendor cpu" in shown.out and "FAILED at wheel (exit 6)" in shown.out
    assert f"kept: {kept}" in shown.out


def test_a_second_failed_release_keeps_its_files_apart(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    check = mini.parent / "components" / "checks" / "engine.py"
    check.write_text("import sys\nprint('token ids: 1 2 3')\nsys.exit(3)\n")
    out = tmp_path / "release"
    for kept in ("release.failed", "release.failed-2"):
        result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out, "--no-verify")
        assert result.code == 7, result.err
        assert f"kept in {tmp_path / kept}" in result.err
        assert "token ids: 1 2 3" in (tmp_path / kept / "check.log").read_text()
        report = json.loads((tmp_path / kept / "release-report.json").read_text())
        assert (report["failed_stage"], report["exit_code"]) == ("check", 7)
        assert list(report["steps"]) == ["preflight", "build", "wheel", "smoke", "check"]
    assert not out.exists() or not any(out.iterdir())


def test_release_preflight_names_a_missing_runtime_requirement_and_its_pip_line(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    require_in_wheel(mini, "infini-stack-absent-dist>=1", "pytest")
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out)
    assert result.code == 3, result.err
    assert "infini-stack-absent-dist>=1 (not installed)" in result.err
    assert "-m pip install 'infini-stack-absent-dist>=1'" in result.err
    assert "pytest" not in result.err.split("hint:")[-1]  # installed here: not asked for
    assert "Traceback" not in result.err
    assert not out.exists()
    assert not (home / "store").exists() or not any((home / "store").glob("*/record.json"))


def test_release_refuses_a_non_empty_output_directory_before_building(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "release"
    out.mkdir()
    (out / "old.whl").write_text("")
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "-o", out)
    assert result.code == 2
    assert "exists and is not empty" in result.err
    assert [p.name for p in out.iterdir()] == ["old.whl"]
    assert not (home / "store").exists()


def test_release_stops_at_preflight_and_writes_nothing_when_a_provider_is_missing(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    text = mini.read_text()
    mini.write_text(text.replace('cuda: ">=12.0"', 'cuda: ">=99.0"'))
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "nvidia", "-o", out)
    assert result.code == 3, result.err
    assert "preflight" in result.err
    assert not out.exists()
    assert not (home / "store").exists() or not any((home / "store").glob("*/record.json"))


def test_wheel_sbom_command_and_release_agree_on_the_sbom(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d").code == 0
    (wheel,) = (tmp_path / "d").glob("*.whl")
    result = cli("sbom", "--manifest", mini, "--vendor", "cpu", "-o", tmp_path / "bom.json")
    assert result.code == 0, result.err
    document = (tmp_path / "bom.json").read_text()
    assert document == sbom_of(wheel)
    with zipfile.ZipFile(wheel) as zf:
        libs = {
            n: hashlib.sha256(zf.read(n)).hexdigest() for n in zf.namelist() if n.endswith(".so")
        }
    files = {
        c["name"]: c["hashes"][0]["content"]
        for c in json.loads(document)["components"]
        if c["type"] == "file"
    }
    assert files == libs


def test_sbom_of_a_stack_not_built_yet_says_to_build_first(
    home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("sbom", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 2
    assert "not built for cpu" in result.err
