"""`report --trace` and `report --html` / `audit --html` on real mini-stack runs: the trace is
trace-event JSON covering every step and every Ninja edge, store hits show as such, and the
page is self-contained with its timeline, its table and the wheel's graph."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder.engine.trace import ninja_edges
from tests.conftest import last_report
from tests.wheelmaker import Compiler, have_gcc, make_wheel

pytestmark = pytest.mark.integration

PHASES = {"X", "i", "M"}


def load_trace(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    assert set(data) >= {"traceEvents", "displayTimeUnit"}
    events: list[dict[str, Any]] = data["traceEvents"]
    for e in events:
        assert e["ph"] in PHASES and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["ts"], int) and e["ts"] >= 0
            assert isinstance(e["dur"], int) and e["dur"] > 0
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t") and isinstance(e["ts"], int)
    return events


def logged_outputs(build_dir: Path) -> set[str]:
    """What Ninja itself logged, read independently of the exporter."""
    lines = (build_dir / ".ninja_log").read_text().splitlines()
    return {line.split("\t")[3] for line in lines if not line.startswith("#")}


def test_the_trace_covers_every_step_and_ninja_edge_of_a_build(
    home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "--jobs", "2").code == 0
    report = last_report(home)
    result = cli("report", "--trace", tmp_path / "trace.json")
    assert result.code == 0, result.err
    events = load_trace(tmp_path / "trace.json")
    slices = [e for e in events if e["ph"] == "X"]
    for c in report["components"]:
        ours = [e for e in slices if e["args"].get("component") == c["name"]]
        component = next(e for e in slices if e["cat"] == "component" and e["name"] == c["name"])
        steps = {e["name"]: e for e in ours if e["cat"] == "step"}
        assert set(steps) == set(c["steps"]), c["name"]
        build = steps["build"]
        assert component["ts"] <= build["ts"] and build["tid"] == component["tid"]
        edges = [e for e in ours if e["cat"] == "ninja"]
        outputs = {o for e in edges for o in e["args"]["outputs"]}
        assert outputs == logged_outputs(Path(c["build_dir"])) and outputs, c["name"]
        for e in edges:  # inside the build step, on tracks of their own
            assert (
                build["ts"] <= e["ts"] and e["ts"] + e["dur"] <= build["ts"] + build["dur"] + 2000
            )
            assert e["tid"] != build["tid"]
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"slot 1", "critical path", "store hits and pulls"} <= tracks
    critical = [e for e in slices if e["cat"] == "critical"]
    last_end = max(e["ts"] + e["dur"] for e in slices if e["cat"] == "component")
    assert critical and max(e["ts"] + e["dur"] for e in critical) == last_end
    assert critical[-1]["name"] == "minilm"  # everything else is a dependency of the engine


def test_store_hits_show_as_hits_in_the_trace(
    shared_home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    assert cli("build", "--manifest", mini, "--vendor", "cpu", "--no-memo").code == 0
    assert cli("report", "--trace", tmp_path / "t.json").code == 0
    events = load_trace(tmp_path / "t.json")
    hits = sorted(e["name"] for e in events if e.get("cat") == "hit")
    assert hits == ["miniccl: hit", "minilm: hit", "miniops: hit", "minirt: hit"]
    assert not [e for e in events if e.get("cat") == "component"]


def test_a_log_older_than_the_run_gives_no_edges(tmp_path: Path) -> None:
    (tmp_path / ".ninja_log").write_text("# ninja log v5\n0\t10\t0\ta.o\tabc\n")
    assert [e.outputs for e in ninja_edges(tmp_path)] == [("a.o",)]
    assert ninja_edges(tmp_path, not_before=(tmp_path / ".ninja_log").stat().st_mtime + 5) == []


def assert_self_contained(text: str) -> None:
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|<img\b|@import|url\(", text)
    fetched = re.findall(r"(?:src|href)=['\"](?!#)([^'\"]+)", text)
    assert fetched == [], fetched


def test_report_html_has_the_timeline_table_and_the_wheels_audit(
    shared_home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "d").code == 0
    report = last_report(shared_home)
    (wheel,) = report["wheels"]
    result = cli("report", "--html", tmp_path / "r.html")
    assert result.code == 0, result.err
    text = (tmp_path / "r.html").read_text()
    assert_self_contained(text)
    assert "id='timeline-svg'" in text and "id='components-table'" in text
    for c in report["components"]:
        assert f"<td>{c['name']}</td>" in text and c["key"][:16] in text
    assert Path(wheel).name in text and "class='graph'" in text
    assert "minicore/lib/libminirt.so" in text  # an ELF of the wheel, in the graph and table


def missing_need_wheel(root: Path) -> Path:
    cc = Compiler(root / "cc")
    gone = cc.shared("libgone.so", "int gone(void) { return 1; }\n", soname="libgone.so")
    lib = cc.shared("libuser.so", "int gone(void);\nint f(void) { return gone(); }\n", links=[gone])
    return make_wheel(root / "w", {"demo/libuser.so": lib, "demo/__init__.py": b""})


@pytest.mark.skipif(not have_gcc(), reason="needs gcc")
def test_audit_html_marks_the_violation_on_its_elf(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    wheel = missing_need_wheel(tmp_path)
    result = cli("audit", wheel, "--vendor", "cpu", "--html", tmp_path / "a.html")
    assert result.code == 6, result.err
    text = (tmp_path / "a.html").read_text()
    assert_self_contained(text)
    layout = "dot" if shutil.which("dot") else "plain"
    assert f"data-layout='{layout}'" in text
    assert "class='finding violation'" in text and "libgone.so" in text
    assert "#c53030" in text  # the missing need and its ELF drawn in the violation colour


@pytest.mark.skipif(not have_gcc(), reason="needs gcc")
def test_the_plain_layout_draws_every_elf_and_need_without_graphviz(tmp_path: Path) -> None:
    from wheels.audit import audit_wheel, to_json
    from wheels.audit_html import graph_svg
    from wheels.policy import load_vendor_policy

    (data,) = to_json([audit_wheel(missing_need_wheel(tmp_path), load_vendor_policy("cpu"))])[
        "wheels"
    ]
    svg = graph_svg(data, layout="plain")
    assert "data-layout='plain'" in svg
    for elf in data["elfs"]:
        assert elf["member"] in svg
        for need in elf["needs"]:
            assert need["soname"] in svg
    assert svg.count("<path") == sum(len(e["needs"]) for e in data["elfs"])


@pytest.mark.parametrize(
    "doc", [[1], {"variants": {"cu130": {"nvidia": ["x"]}}}], ids=["a-list", "bad-properties"]
)
def test_audit_html_of_a_variant_wheel_with_broken_metadata_is_a_finding_not_a_traceback(
    tmp_path: Path, doc: object, cli
) -> None:  # type: ignore[no-untyped-def]
    files = {"demo/__init__.py": b"", "demo-1.0.dist-info/variant.json": json.dumps(doc).encode()}
    plain = make_wheel(tmp_path / "w", files, version="1.0", tag="py3-none-linux_x86_64")
    wheel = plain.rename(plain.with_name(plain.name[: -len(".whl")] + "-cu130.whl"))
    page = tmp_path / "audit.html"
    result = cli("audit", "--no-cache", "--html", page, wheel)
    assert result.code == 6 and "Traceback" not in result.err
    assert "[variant-metadata]" in result.out
    assert "variant-metadata" in page.read_text() and "<p>variant <code>" not in page.read_text()
