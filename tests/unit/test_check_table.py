"""The runtime check's table (builder/checks/runtime.py): drawn from the script's JSON lines for
check.log and report --html; and the nvidia script's lines that need no GPU (the TP=2 case on
one GPU, what the graph log says, the summary's sets)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

from builder.checks.runtime import COLUMNS, CheckResult, case_rows, table, verdict
from builder.engine.html_report import check_section, table_html
from tests.conftest import ROOT

CHECKS = ROOT / "components" / "checks"
TAGS = ("cp311", "cp312")

OUTPUT = "\n".join(
    [
        json.dumps({"check": "environment", "ok": True, "device": "NVIDIA H200"}),
        json.dumps(
            {
                "check": "graph.paged.paged-attn",
                "ok": True,
                "cache": "paged",
                "backend": "paged-attn",
                "graph": "captured",
                "batch": 1,
                "expected": [5, 9, 11],
                "got": [5, 9, 11],
            }
        ),
        json.dumps(
            {
                "check": "batch.reversed.0",
                "ok": False,
                "cache": "paged",
                "backend": "paged-attn",
                "graph": False,
                "batch": 4,
                "expected": [7, 8],
                "got": [7, 3],
            }
        ),
        "tp2: not run (1 GPU)",
        json.dumps({"check": "tp2", "ok": False, "required": False, "not_run": "1 GPU"}),
        json.dumps({"check": "sampling.seed", "ok": False, "required": False, "gap": "known"}),
        "{not json",
        json.dumps({"check": "summary", "ok": False, "failed": ["batch.reversed.0"]}),
    ]
)


def load_nvidia() -> ModuleType:
    """A fresh copy of the check script, with fresh copies of the modules it imports from
    beside itself: ``children`` keeps the run's failed and gap cases in module lists, which a
    copy shared with an earlier test would still hold."""
    for name in ("children", "goodness"):
        sys.modules.pop(name, None)
    sys.path.insert(0, str(CHECKS))  # the script imports goodness from beside itself
    try:
        spec = importlib.util.spec_from_file_location("nvidia_check", CHECKS / "nvidia.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CHECKS))
    return module


def test_rows_come_from_lines_that_name_an_engine_ids_or_a_case_not_run() -> None:
    rows = case_rows(OUTPUT)
    assert [row.case for row in rows] == ["graph.paged.paged-attn", "batch.reversed.0", "tp2"]
    graph, batch, tp2 = rows
    assert (graph.graph, graph.batch, graph.expected, graph.got) == (
        "captured",
        "1",
        "5 9 11",
        "5 9 11",
    )
    assert graph.verdict == "pass"
    assert (batch.graph, batch.got, batch.verdict) == ("off", "7 3", "FAIL")
    assert tp2.verdict == "not run (1 GPU)" and tp2.cache == "-"


def test_the_text_table_has_a_header_a_rule_and_aligned_columns() -> None:
    text = table(case_rows(OUTPUT)).splitlines()
    assert text[0].split() == [
        "case",
        "cache",
        "backend",
        "graph",
        "batch",
        "expected",
        "ids",
        "got",
        "ids",
        "verdict",
    ]
    assert set(text[1].replace(" ", "")) == {"-"}
    assert len(text) == 2 + 3
    start = text[0].index("verdict")
    assert [line[start:] for line in text[2:]] == ["pass", "FAIL", "not run (1 GPU)"]


def test_the_log_is_the_output_then_the_table() -> None:
    result = CheckResult(
        ok=False, script=Path("nvidia.py"), output=OUTPUT, seconds=1.0, returncode=1
    )
    log = result.log()
    assert log.startswith(OUTPUT + "\n\n")
    assert log.rstrip().endswith("not run (1 GPU)")
    plain = CheckResult(
        ok=True,
        script=Path("e.py"),
        output='{"check": "add", "ok": true}\n',
        seconds=1.0,
        returncode=0,
    )
    assert plain.log() == plain.output  # no case names an engine: no table


def test_the_html_table_escapes_its_cells_and_the_report_shows_it_only_with_rows() -> None:
    rows = CheckResult(
        ok=True, script=Path("n.py"), output=OUTPUT, seconds=1.0, returncode=0
    ).row_dicts()
    rows[0]["got"] = "<b>"
    cells = table_html(rows, COLUMNS)
    assert cells.count("<tr>") == 1 + 3 and "&lt;b&gt;" in cells
    assert all(f"<th>{c}</th>" in cells for c in COLUMNS)
    report = {"release": {"stages": {"check": {"ran": True, "rows": rows, "columns": COLUMNS}}}}
    assert "<section id='check'><h2>Check</h2><table>" in check_section(report)
    assert check_section({"release": {"stages": {"check": {"ran": False}}}}) == ""
    assert check_section({}) == ""
    # A release of several interpreters: one table each, headed with its tag.
    stages = {f"check {tag}": {"ran": True, "rows": rows, "columns": COLUMNS} for tag in TAGS}
    section = check_section({"release": {"stages": stages}})
    assert section.count("<table>") == 2
    assert section.index("<h3>cp311</h3>") < section.index("<h3>cp312</h3>")


def test_tp2_on_one_gpu_prints_the_not_run_line_and_is_no_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nvidia = load_nvidia()
    nvidia.check_tp2("/no/model", [5, 6], [5, 6], 1)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tp2: not run (1 GPU)"
    line = json.loads(out[1])
    assert line == {"check": "tp2", "ok": False, "required": False, "not_run": "1 GPU"}
    assert nvidia.NOT_RUN == ["tp2"] and nvidia.FAILED == []
    assert case_rows("\n".join(out))[0].verdict == "not run (1 GPU)"


def test_the_graph_log_tells_a_capture_from_a_fallback() -> None:
    nvidia = load_nvidia()
    captured = nvidia.graph_log(
        "[2026-12-04 10:00:00.000] [info] [graph.cc:272] Using InfiniRT C++ graph runtime API "
        "for graph capture and replay.\nRESULT {}"
    )
    assert nvidia.graph_mode({"graph_log": captured}) == "captured"
    failed = nvidia.graph_log("[warning] [graph.cc:243] Fail to begin device graph capture.\n")
    mode = nvidia.graph_mode({"graph_log": failed})
    assert mode.startswith("eager (fallback: ") and "Fail to begin device graph capture." in mode
    assert nvidia.graph_mode({"graph_log": nvidia.graph_log("")}) == (
        "eager (fallback: no device graph captured)"
    )


def test_forced_argmax_makes_every_engine_sample_with_top_k_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvidia = load_nvidia()
    wanted = {"top_k": 512, "top_p": 1.0, "temperature": 0.5}
    monkeypatch.delenv(nvidia.FORCE_ARGMAX, raising=False)
    assert nvidia.engine_sampling(wanted) == wanted
    monkeypatch.setenv(nvidia.FORCE_ARGMAX, "1")
    assert nvidia.engine_sampling(wanted) == {**wanted, "top_k": 1}


def standin_statistics(
    monkeypatch: pytest.MonkeyPatch, sampler: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, dict[str, object]]:
    """nvidia.check_statistics with stand-ins for transformers' logits and for InfiniLM's draws
    (numpy draws: correct, argmax, or ignoring the temperature); its JSON lines by case."""
    np = pytest.importorskip("numpy")
    nvidia = load_nvidia()
    rng = np.random.default_rng(3)
    rows = [[0.0] * 4 + [float(x) for x in rng.normal(0, 2.5, 508)] for _ in range(13)]
    greedy = [int(np.argmax(row)) for row in rows[:12]]

    def draws(mode: str, spec: dict[str, object]) -> dict[str, object]:
        assert mode == "draws" and spec["draws"] == nvidia.DRAWS
        row = rows[len(str(spec["prompt"]).split()) - len(nvidia.PROMPT.split())]
        temperature = 1.0 if sampler == "ignores temperature" else float(spec["temperature"])  # type: ignore[arg-type]
        probs = np.asarray(nvidia.goodness.softmax(row, temperature))
        if sampler == "argmax":
            ids = [int(np.argmax(probs))] * nvidia.DRAWS
        else:
            ids = [int(t) for t in rng.choice(len(probs), size=nvidia.DRAWS, p=probs / probs.sum())]
        return {"outcome": "ok", "draws": ids}

    monkeypatch.setattr(nvidia, "run_child", draws)
    monkeypatch.setattr(nvidia, "next_token_logits", lambda model, text, ids: rows)
    nvidia.check_statistics("/no/model", greedy)
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return {line["check"]: line for line in out}


def test_standin_correct_sampler_passes_the_statistical_cases(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = standin_statistics(monkeypatch, "correct", capsys)
    assert seen["sampling.t1"]["ok"] and seen["sampling.t0.5"]["ok"]
    assert seen["sampling.sensitivity"]["ok"]
    line = seen["sampling.t1"]
    assert line["statistic"] <= line["threshold"] and line["p_value"] > 1e-6  # type: ignore[operator]
    assert line["false_failure_rate"] == 1e-4 and line["draws"] == 1024


def test_standin_argmax_sampler_fails_both_temperatures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = standin_statistics(monkeypatch, "argmax", capsys)
    assert not seen["sampling.t1"]["ok"] and not seen["sampling.t0.5"]["ok"]
    assert seen["sampling.t1"]["p_value"] < 1e-6  # type: ignore[operator]


def test_standin_sampler_ignoring_the_temperature_fails_at_half(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = standin_statistics(monkeypatch, "ignores temperature", capsys)
    assert seen["sampling.t1"]["ok"] and not seen["sampling.t0.5"]["ok"]


def standin_greedy(prompt: str) -> list[int]:
    """The ids the stand-in InfiniLM and transformers both give for ``prompt``."""
    return [4 + (7 * i + len(prompt)) % 500 for i in range(12)]


def standin_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], jobs: int
) -> tuple[str, list[tuple[str, dict[str, object]]], set[int]]:
    """main() with stand-ins for the GPU's parts (children answer as a correct InfiniLM would,
    transformers' logits are made up), its children ``jobs`` at a time: its output, the
    children's specs, and the threads they were started from."""
    np = pytest.importorskip("numpy")
    monkeypatch.setenv("INFINI_STACK_CHECK_JOBS", str(jobs))
    nvidia = load_nvidia()
    rng = np.random.default_rng(4)
    rows = [[0.0] * 4 + [float(x) for x in rng.normal(0, 2.5, 508)] for _ in range(13)]
    greedy = {p: standin_greedy(p) for p in nvidia.BATCH_PROMPTS}
    specs: list[tuple[str, dict[str, object]]] = []
    threads: set[int] = set()

    def child(mode: str, spec: dict[str, object]) -> dict[str, object]:
        specs.append((mode, spec))
        threads.add(threading.get_ident())
        if mode == "draws":
            row = rows[len(str(spec["prompt"]).split()) - len(nvidia.PROMPT.split())]
            probs = np.asarray(nvidia.goodness.softmax(row, float(spec["temperature"])))  # type: ignore[arg-type]
            ids = rng.choice(len(probs), size=nvidia.DRAWS, p=probs / probs.sum())
            return {"outcome": "ok", "draws": [int(t) for t in ids]}
        if mode == "seed":
            return {"outcome": "ok", "first": [5, 9, 5], "again": [5, 9, 5], "values": [0.1]}
        if mode == "ops":
            return {"outcome": "ok", "ops": {"add": {"ok": True, "max_abs_err": 0.0}}}
        if (spec["cache"], spec["backend"]) in nvidia.REJECTED:
            return {"outcome": "ok", "phase": "construct", "exception": "ValueError"}
        sets = [
            [greedy[p] for p in prompts] for prompts in spec.get("prompt_sets", [[nvidia.PROMPT]])
        ]  # type: ignore[attr-defined]
        found = {
            "outcome": "ok",
            "phase": "generate",
            "token_ids": sets[0][0],
            "token_id_sets": sets,
        }
        if spec.get("graph"):
            found["graph_log"] = {"captured": spec["cache"] == "paged", "failures": []}
        return found

    monkeypatch.setattr(sys, "argv", ["nvidia.py"])
    monkeypatch.setattr(nvidia, "run_child", child)
    monkeypatch.setattr(nvidia, "check_environment", lambda: True)
    monkeypatch.setattr(nvidia, "check_import", lambda: True)
    monkeypatch.setattr(nvidia, "make_model", lambda directory: None)
    monkeypatch.setattr(nvidia, "reference", lambda model, prompts: {p: greedy[p] for p in prompts})
    monkeypatch.setattr(nvidia, "next_token_logits", lambda model, text, ids: rows)
    monkeypatch.setattr(nvidia, "outside_filters", lambda *args, **kwargs: [])
    monkeypatch.setattr(nvidia, "gpu_count", lambda: 1)
    assert nvidia.main() == 0
    return capsys.readouterr().out, specs, threads


def test_standin_children_take_main_through_every_case(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case prints its line, the summary passes, and a one-GPU host says tp2 was not
    run."""
    out, specs, _ = standin_main(monkeypatch, capsys, jobs=4)
    prompts = load_nvidia().BATCH_PROMPTS
    seen = {
        json.loads(line)["check"]: json.loads(line)
        for line in out.splitlines()
        if line.startswith("{")
    }
    assert seen["summary"]["ok"] is True and seen["summary"]["not_run"] == ["tp2"]
    assert seen["summary"]["budget_seconds"] == 90.0 and seen["summary"]["within_budget"] is True
    assert seen["summary"]["jobs"] == 4
    assert seen["graph.paged.paged-attn"]["graph"] == "captured"
    assert seen["graph.static.default"]["graph"] == "eager (fallback: no device graph captured)"
    assert seen["graph"]["captured"] == ["paged.paged-attn"]
    assert seen["batch.reversed.0"]["expected"] == standin_greedy(prompts[-1])
    assert {
        f"batch{g}.{o}.{i}"
        for g in ("", ".graph")
        for o in ("in_order", "reversed")
        for i in range(3)
    } <= set(seen)
    assert (
        seen["sampling.t1"]["ok"]
        and seen["sampling.t0.5"]["ok"]
        and seen["sampling.sensitivity"]["ok"]
    )
    assert seen["sampling.seed"]["ok"] and seen["tp2"]["not_run"] == "1 GPU"
    assert "tp2: not run (1 GPU)" in out.splitlines()
    batch_specs = [s for m, s in specs if m == "llm" and "prompt_sets" in s]
    assert all(s["batch"] >= 2 and s["cache"] == "paged" for s in batch_specs)
    assert [s["prompt_sets"][1] for s in batch_specs] == [list(prompts[::-1])] * 2  # type: ignore[index]


def test_standin_children_run_side_by_side_and_the_lines_keep_the_serial_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same main() one child at a time and four at a time: the groups of cases ran in
    threads of their own beside each other, and the lines came out in the serial run's order."""
    serial, _, one = standin_main(monkeypatch, capsys, jobs=1)
    parallel, _, several = standin_main(monkeypatch, capsys, jobs=4)

    def cases(out: str) -> list[str]:
        return [
            line if not line.startswith("{") else json.loads(line)["check"]
            for line in out.splitlines()
        ]

    assert len(one) == 1 and len(several) > 1
    assert cases(serial) == cases(parallel) and len(cases(serial)) == 38


def test_the_summary_row_gives_its_own_verdict_and_names_the_cases_not_run() -> None:
    """On one GPU the summary passes with tp2 not run: the row says both, never a bare
    'not run' (the check ran) nor a Python list."""
    passed = {"check": "summary", "ok": True, "failed": [], "not_run": ["tp2"]}
    failed = {"check": "summary", "ok": False, "failed": ["sampling.t1"], "not_run": ["tp2"]}
    assert verdict(passed) == "pass (not run: tp2)"
    assert verdict(failed) == "FAIL (not run: tp2)"
    assert verdict({**passed, "not_run": []}) == "pass"
    assert verdict({"check": "tp2", "ok": False, "not_run": "1 GPU"}) == "not run (1 GPU)"


def test_a_check_failed_by_a_sanitizer_report_alone_says_so_with_the_report() -> None:
    from builder.core.sanitizer_findings import findings

    report = (
        "==7==ERROR: AddressSanitizer: SEGV on unknown address (pc 0x1 T0)\n"
        "    #0 0x1 in Op::~Op() /infini-stack/src/lm/graph.cc:147\n"
        "SUMMARY: AddressSanitizer: SEGV /infini-stack/src/lm/graph.cc:147 in Op::~Op()\n"
    )
    result = CheckResult(
        ok=False,
        script=Path("cpu.py"),
        output=report,
        seconds=1.0,
        returncode=0,
        findings=tuple(findings(report)),
    )
    head, where, frame = result.render().splitlines()
    assert head == "check cpu.py: FAILED (1 sanitizer report(s); the script exited 0) in 1.0s"
    assert where == "  address: SEGV at /infini-stack/src/lm/graph.cc:147"
    assert frame.endswith("in Op::~Op() /infini-stack/src/lm/graph.cc:147")
