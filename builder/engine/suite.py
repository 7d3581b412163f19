"""Run a component's own pytest suite on its store entry and read what it did.

The suite's build (when it has one) runs first, in its own directory; its Python module is put
in a package of its own. pytest writes a JUnit file beside the logs, which gives the counts
(passed, failed, skipped, xfailed), the slowest tests, each failure's first lines of output and
why tests were skipped. A failure is a :class:`BuildError` (exit 5) naming the failing tests.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from builder.core import proc
from builder.core.errors import BuildError, CommandFailed
from builder.core.fs import atomic_write
from builder.plan import ComponentPlan
from builder.plan_suites import SUITE_STEP_CONFIGURE, TEST_STEP_CONFIGURE, PlannedSuite, SuiteStep

SLOWEST = 10  # the slowest tests a report names
FAILURE_LINES = 12  # the lines of a failing test's output a report keeps
FAILURES_SHOWN = 10  # the failing tests an error names
PYTEST_NO_TESTS = 5  # pytest's exit status when nothing was collected
STAMP = ".infini-stack-suite-configured"  # the configure command a build beside the entry has


class SuiteFailed(BuildError):
    """A test of a component's suite failed (exit 5); ``record`` is what the report keeps."""

    def __init__(self, message: str, record: dict[str, Any], *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.record = record


# What runs a suite, as pip takes it (this tool depends on both; another interpreter may not).
RUNNER_REQUIREMENTS = "'pytest>=8' 'pytest-xdist>=3'"


def run_suite(
    component: ComponentPlan,
    *,
    env: Mapping[str, str],
    logs: Path,
    children: proc.Children,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Build what the suite needs, run it, and return its record for the run report; raises
    :class:`SuiteFailed` (with the record) when a test failed."""
    suite = component.suite
    assert suite is not None
    run_env = _environment(env, suite)
    _require_pytest(component.name, suite, run_env)
    seconds = build_beside(component.name, suite.steps, suite.build_dir, run_env, logs, children)
    if suite.package_dir is not None:
        _package_module(component.name, suite)
    argv = _parallel(suite, run_env, say)
    junit = logs / "suite.xml"
    junit.unlink(missing_ok=True)
    log = logs / "suite.log"
    argv = (*argv, f"--junitxml={junit}", "-o", "junit_family=xunit1")
    ran = proc.run(argv, cwd=suite.cwd, env=run_env, log=log, check=False, children=children)
    record = {
        "command": list(argv),
        "cwd": str(suite.cwd),
        "returncode": ran.returncode,
        "seconds": round(ran.seconds, 3),
        "build_seconds": seconds,
        "workers": _workers(argv),
        "log": str(log),
        "junit": str(junit),
        "deselected": [{"test": d.test, "reason": d.reason} for d in suite.deselected],
        "selected": list(suite.selected),
        **read_junit(junit),
    }
    # Killed by a signal, or stopped (usage, internal error) before any test: its log says why.
    stopped = ran.returncode not in (0, 1, PYTEST_NO_TESTS) and not any(record["counts"].values())
    if ran.returncode < 0 or stopped:
        record["crash"] = crash_lines(log)
    record["ok"] = ran.returncode == 0
    if not record["ok"]:
        raise SuiteFailed(suite_failure(component.name, record), record, hint=f"suite log: {log}")
    return record


def build_beside(
    name: str,
    steps: tuple[SuiteStep, ...],
    build_dir: Path | None,
    env: Mapping[str, str],
    logs: Path,
    children: proc.Children,
) -> dict[str, float]:
    """A build beside the entry (a suite's, a test's), step by step, each with its log; its
    configure is skipped where the directory was configured with the same command (a stamp
    written after it succeeded), the build is incremental."""
    seconds: dict[str, float] = {}
    for step in steps:
        stamp = build_dir / STAMP if build_dir is not None else None
        wanted = json.dumps(list(step.argv))
        configure = step.kind in (SUITE_STEP_CONFIGURE, TEST_STEP_CONFIGURE)
        if configure and stamp is not None:
            if stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
                continue
            stamp.unlink(missing_ok=True)
        try:
            done = proc.run(
                step.argv,
                what=f"{name}: {step.kind}",
                env=env,
                log=logs / f"{step.kind}.log",
                children=children,
            )
        except CommandFailed as exc:
            raise BuildError(f"component '{name}', {step.kind}: {exc.message}") from exc
        seconds[step.kind] = round(done.seconds, 3)
        if configure and stamp is not None:
            atomic_write(stamp, wanted)
    return seconds


def _environment(env: Mapping[str, str], suite: PlannedSuite) -> dict[str, str]:
    out = dict(env)
    for name, value in suite.env.items():
        if name in ("LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "PYTHONPATH") and out.get(name):
            out[name] = f"{value}:{out[name]}"
        else:
            out[name] = value
    return out


def _package_module(name: str, suite: PlannedSuite) -> None:
    """The suite build's module (``<target>.cpython-*.so``) in its package, alone."""
    assert suite.build_dir is not None and suite.package_dir is not None
    target = suite.target or ""
    found = sorted(
        p
        for p in suite.build_dir.rglob(f"{target}.*so")
        if p.is_file() and suite.package_dir not in p.parents
    )
    if not found:
        raise BuildError(
            f"component '{name}': the suite build made no Python module '{target}' "
            f"under {suite.build_dir}"
        )
    if suite.package_dir.exists():
        shutil.rmtree(suite.package_dir)
    suite.package_dir.mkdir(parents=True)
    (suite.package_dir / "__init__.py").write_text("", encoding="utf-8")
    shutil.copy2(found[0], suite.package_dir / found[0].name)


def _require_pytest(name: str, suite: PlannedSuite, env: Mapping[str, str]) -> None:
    """The interpreter that runs the suite must have pytest (a dependency of this tool: missing
    only where the suite runs with another interpreter)."""
    python = suite.argv[0]
    if proc.run([python, "-c", "import pytest"], env=env, check=False).returncode != 0:
        raise BuildError(
            f"component '{name}', suite: pytest is not installed for {python}",
            hint=f"install it: {python} -m pip install {RUNNER_REQUIREMENTS}",
        )


def _parallel(
    suite: PlannedSuite, env: Mapping[str, str], say: Callable[[str], None]
) -> tuple[str, ...]:
    """The suite's command; without ``-n`` where pytest-xdist is not installed (said: a test
    that crashes then ends the whole suite)."""
    argv = suite.argv
    probe = proc.run([argv[0], "-c", "import xdist"], env=env, check=False)
    if probe.returncode == 0:
        return argv
    say(
        f"pytest-xdist is not installed for {argv[0]}: the suite runs in one process, "
        "and a test that crashes it ends it"
    )
    i = argv.index("-n")
    return (*argv[:i], *argv[i + 3 :])


def _workers(argv: tuple[str, ...]) -> int:
    return int(argv[argv.index("-n") + 1]) if "-n" in argv else 1


def read_junit(path: Path) -> dict[str, Any]:
    """Counts, the slowest tests, the failures (with their first lines) and the skip reasons
    of a pytest JUnit file (xunit1: each case names its file)."""
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped", "xfailed"), 0)
    timed: list[tuple[float, str]] = []
    failures: list[dict[str, str]] = []
    reasons: collections.Counter[str] = collections.Counter()
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {"counts": counts, "slowest": [], "failures": [], "skip_reasons": []}
    for case in root.iter("testcase"):
        test = node_id(case)
        timed.append((float(case.get("time") or 0), test))
        verdict = _verdict(case)
        counts[verdict] += 1
        if verdict in ("failed", "errors"):
            failures.append({"test": test, "output": _first_lines(case)})
        elif verdict == "skipped":
            skipped = case.find("skipped")
            reasons[_skip_reason(skipped.get("message", "") if skipped is not None else "")] += 1
    timed.sort(key=lambda t: -t[0])
    return {
        "counts": counts,
        "slowest": [{"test": t, "seconds": round(s, 3)} for s, t in timed[:SLOWEST]],
        "failures": failures,
        "skip_reasons": [{"reason": r, "count": n} for r, n in reasons.most_common(SLOWEST)],
    }


def _verdict(case: ET.Element) -> str:
    if case.find("failure") is not None:
        return "failed"
    if case.find("error") is not None:
        return "errors"
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def node_id(case: ET.Element) -> str:
    """``path::Class::name`` as pytest names a test, from an xunit1 case."""
    name = case.get("name", "")
    classname = case.get("classname", "")
    file = case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".").replace(os.sep, ".")
    rest = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    parts = [file, *(p for p in rest.split(".") if p), name]
    return "::".join(parts)


def crash_lines(log: Path) -> str:
    """What a log says of a process that died under pytest: from ``Fatal Python error`` (or a
    sanitizer's or the kernel's word for it) through the frames that follow, else its last
    lines."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    marks = ("Fatal Python error", "Segmentation fault", "Floating point exception", "Aborted")
    start = next((i for i, line in enumerate(lines) if line.startswith(marks)), None)
    if start is None:
        return "\n".join(lines[-FAILURE_LINES:])
    return "\n".join(lines[start : start + FAILURE_LINES])


def _first_lines(case: ET.Element) -> str:
    """The first lines of what pytest said of a failing test: its ``E`` lines, then where."""
    element = case.find("failure")
    if element is None:
        element = case.find("error")
    text = ((element.text or "") if element is not None else "").strip("\n")
    message = element.get("message", "") if element is not None else ""
    lines = text.splitlines() or message.splitlines()
    # pytest's own "E" lines say what failed; the last line says where.
    said = [line for line in lines if line.startswith("E ")]
    if not said:
        return "\n".join(lines[:FAILURE_LINES])
    where = [lines[-1]] if lines[-1] not in said else []
    return "\n".join(said[: FAILURE_LINES - len(where)] + where)


def _skip_reason(message: str) -> str:
    """pytest writes ``file:line: reason``; the reason alone groups the same skips."""
    head, sep, reason = message.partition(": ")
    return reason if sep and ":" in head and head.split(":")[0].endswith(".py") else message


def suite_failure(name: str, record: Mapping[str, Any]) -> str:
    """What a failed suite's error says: the counts and each failing test's first lines."""
    counts = record.get("counts", {})
    failed = counts.get("failed", 0) + counts.get("errors", 0)
    code = record.get("returncode")
    if failed:
        head = f"component '{name}', suite: {failed} test(s) failed ({counts_text(counts)})"
    elif code == PYTEST_NO_TESTS:
        head = f"component '{name}', suite: no test was collected (pytest exit status 5)"
    else:
        head = (
            f"component '{name}', suite: pytest exited with status {code} ({counts_text(counts)})"
        )
    lines = [head, "  command: " + proc.quote(record.get("command", []))]
    if record.get("crash"):
        lines.append("  pytest did not finish; its log ends:")
        lines.extend(f"    | {line}" for line in record["crash"].splitlines())
    for failure in record.get("failures", [])[:FAILURES_SHOWN]:
        lines.append(f"  FAILED {failure['test']}")
        lines.extend(f"    | {line}" for line in failure["output"].splitlines())
    more = len(record.get("failures", [])) - FAILURES_SHOWN
    if more > 0:
        lines.append(f"  ... and {more} more (the run report lists them)")
    return "\n".join(lines)


def counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(
        f"{counts.get(k, 0)} {k}" for k in ("passed", "failed", "errors", "skipped", "xfailed")
    )
