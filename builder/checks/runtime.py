"""The vendor's runtime check: its script run against the installed wheel, on the vendor's device.

``stack.yaml`` names per vendor a Python script kept in the repository (``vendors.<v>.check``).
The wheel is installed, without its dependencies, into a fresh virtual environment that sees
what an install into the target interpreter would see (:mod:`builder.checks.venv`); the script
runs there from an empty directory, and passes by exiting 0. It finds the wheel and vendor in
``INFINI_STACK_CHECK_WHEEL`` and ``INFINI_STACK_CHECK_VENDOR``. ``check --force-argmax`` sets
``INFINI_STACK_CHECK_FORCE_ARGMAX=1``: the script's engine then samples by argmax, which its
sampling statistics must reject. ``NCCL_NVLS_ENABLE=0`` always (NVLink multicast off).
``--check-jobs N`` sets ``INFINI_STACK_CHECK_JOBS``: how many of the script's child processes run
at once (``components/checks/children.py``; 1: one after another); the script's summary line
says how many did (``jobs``) and when each child ran (``children``: ``report --trace`` draws
them as lanes).

A script prints one JSON line per case. Lines that name a case's engine (``cache``, ``backend``,
``graph``, ``batch``) or its ids (``expected``, ``got``) make the table :func:`table` draws for
``check.log`` and, in the release's report, the rows ``report --html`` draws as a table.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from builder.checks import sanitized, venv
from builder.core import proc
from builder.core.errors import EXIT_CHECK, CommandFailed
from builder.core.sanitize import Profile, Suppression
from builder.core.sanitizer_findings import Finding, findings
from builder.vendors.base import Vendor

TIMEOUT = 1800.0  # seconds: the nvidia check builds a model and generates several times
FORCE_ARGMAX = "INFINI_STACK_CHECK_FORCE_ARGMAX"
JOBS = "INFINI_STACK_CHECK_JOBS"
COLUMNS = ("case", "cache", "backend", "graph", "batch", "expected ids", "got ids", "verdict")


@dataclass(frozen=True)
class Device:
    present: bool
    what: str  # the device found, or why none was


def find_device(vendor: Vendor, env: dict[str, str] | None = None) -> Device:
    """The vendor's device on this host, by the vendor's own listing command."""
    if not vendor.device_command:
        return Device(True, "the host")
    tool, *args = vendor.device_command
    path = proc.which(tool, (env or os.environ).get("PATH"))
    if path is None:
        return Device(False, f"no {vendor.name} device: {tool} not found")
    try:
        result = proc.run([path, *args], check=False, timeout=30, env=env)
    except CommandFailed as exc:
        return Device(False, f"no {vendor.name} device: {tool}: {exc.message}")
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        why = lines[-1] if lines else f"exit status {result.returncode}"
        return Device(False, f"no {vendor.name} device: {Path(tool).name}: {why}")
    return Device(True, lines[0])


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    script: Path
    output: str
    seconds: float
    returncode: int
    findings: tuple[Finding, ...] = ()  # sanitizer reports in its output

    def render(self) -> str:
        verdict = "passed" if self.ok else f"FAILED (exit status {self.returncode})"
        if not self.ok and self.returncode == 0 and self.findings:
            verdict = f"FAILED ({len(self.findings)} sanitizer report(s); the script exited 0)"
        text = f"check {self.script.name}: {verdict} in {self.seconds:.1f}s"
        lines = [line for f in self.findings for line in f.lines()]
        return "\n".join([text, *(f"  {line}" for line in lines)])

    def rows(self) -> tuple[CaseRow, ...]:
        return case_rows(self.output)

    def row_dicts(self) -> list[dict[str, str]]:
        return [asdict(row) for row in self.rows()]

    def pool(self) -> dict[str, Any]:
        """What the summary line says of the children: ``jobs`` and ``children`` (each with
        ``child``, ``start`` in seconds since the epoch, ``seconds`` and ``outcome``)."""
        for line in reversed(json_lines(self.output)):
            if line.get("check") == "summary":
                return {k: line[k] for k in ("jobs", "children") if k in line}
        return {}

    def log(self) -> str:
        """The script's output, then the table of its cases (where it printed any)."""
        rows = self.rows()
        output = (
            self.output if self.output.endswith("\n") or not self.output else self.output + "\n"
        )
        return output + ("\n" + table(rows) + "\n" if rows else "")


@dataclass(frozen=True)
class CaseRow:
    case: str
    cache: str
    backend: str
    graph: str
    batch: str
    expected: str
    got: str
    verdict: str


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return " ".join(_cell(v) for v in value) if value else "[]"
    return str(value)


def verdict(line: Mapping[str, Any]) -> str:
    """A case's verdict: pass, FAIL, gap (known, not required) or not run (never a pass).
    The summary's ``not_run`` lists the cases that did not run: its verdict is its own,
    followed by them (``pass (not run: tp2)``)."""
    not_run = line.get("not_run")
    if isinstance(not_run, list):
        own = verdict({k: v for k, v in line.items() if k != "not_run"})
        return f"{own} (not run: {', '.join(map(str, not_run))})" if not_run else own
    if not_run:
        return f"not run ({not_run})"
    if line.get("ok") is True:
        return "pass"
    return "gap" if line.get("gap") else "FAIL"


def case_row(line: Mapping[str, Any]) -> CaseRow | None:
    """The table row of one JSON line: those naming an engine or ids, and the not-run cases."""
    named = ("cache", "backend", "graph", "batch", "expected", "got", "not_run")
    if "check" not in line or not any(key in line for key in named):
        return None
    return CaseRow(
        case=str(line["check"]),
        cache=_cell(line.get("cache")),
        backend=_cell(line.get("backend")),
        graph=_cell(line.get("graph")),
        batch=_cell(line.get("batch")),
        expected=_cell(line.get("expected")),
        got=_cell(line.get("got")),
        verdict=verdict(line),
    )


def json_lines(output: str) -> list[dict[str, Any]]:
    """The JSON objects the script printed, one a line."""
    found = []
    for text in output.splitlines():
        if not text.startswith("{"):
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict):
            found.append(line)
    return found


def case_rows(output: str) -> tuple[CaseRow, ...]:
    rows = (case_row(line) for line in json_lines(output))
    return tuple(row for row in rows if row is not None)


def table(rows: Sequence[CaseRow]) -> str:
    """The cases as a text table, columns padded to their widest cell."""
    cells = [COLUMNS, *(tuple(asdict(row).values()) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in text)


def run_check(
    wheel: Path,
    vendor: str,
    script: Path,
    python: str,
    *,
    force_argmax: bool = False,
    jobs: int | None = None,
    sanitize: Profile | None = None,
    suppressions: tuple[Suppression, ...] = (),
) -> CheckResult:
    """Install ``wheel`` into a fresh venv seeing ``python``'s packages, run ``script`` there
    (its children ``jobs`` at a time, None: as many as the script finds room for; and under
    ``sanitize``'s runtime, where a report fails the check)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="infini-check-") as tmp:
        work = Path(tmp)
        interpreter = venv.install(wheel, venv.make(work / "venv", python), work)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(
            {
                "PYTHONNOUSERSITE": "1",
                "PYTHONUNBUFFERED": "1",
                "INFINI_STACK_CHECK_WHEEL": str(wheel.resolve()),
                "INFINI_STACK_CHECK_VENDOR": vendor,
                # NVLink multicast off for the check's collectives (its TP=2 case), as for
                # InfiniCCL's all-reduce test
                "NCCL_NVLS_ENABLE": "0",
            }
        )
        if force_argmax:
            env[FORCE_ARGMAX] = "1"
        else:
            env.pop(FORCE_ARGMAX, None)
        if jobs is not None:
            env[JOBS] = str(jobs)
        result = proc.run(
            [str(interpreter), str(script)],
            cwd=work,
            env=sanitized.python_env(
                sanitize, vendor, env, suppressions=suppressions, work=work / "suppressions"
            ),
            check=False,
            timeout=TIMEOUT,
            exit_code=EXIT_CHECK,
        )
    found = tuple(findings(result.output)) if sanitize else ()
    return CheckResult(
        ok=result.returncode == 0 and not found,
        script=script,
        output=result.output,
        seconds=time.monotonic() - start,
        returncode=result.returncode,
        findings=found,
    )
