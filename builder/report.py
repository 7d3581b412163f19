"""Run reports: what each build did, as JSON for machines and a summary table for people."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from builder.errors import UsageError
from builder.layout import Layout

Status = Literal["hit", "built", "failed", "skipped", "interrupted"]


@dataclass
class ComponentResult:
    name: str
    key: str
    status: Status = "skipped"
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    logs: dict[str, str] = field(default_factory=dict)  # step -> log path
    outputs: list[str] = field(default_factory=list)
    prefix: str = ""
    error: str | None = None
    seconds: float = 0.0


@dataclass
class RunReport:
    command: str
    vendor: str
    manifest: str
    started: float = field(default_factory=time.time)
    seconds: float = 0.0
    providers: dict[str, str] = field(default_factory=dict)
    components: list[ComponentResult] = field(default_factory=list)
    ok: bool = False

    def result(self, name: str) -> ComponentResult:
        return next(c for c in self.components if c.name == name)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["totals"] = {
            status: sum(1 for c in self.components if c.status == status)
            for status in ("hit", "built", "failed", "skipped", "interrupted")
        }
        return data


def write(report: RunReport, layout: Layout) -> Path:
    runs = layout.runs()
    runs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(report.started))
    path = runs / f"{stamp}-{report.command}-{report.vendor}-{os.getpid()}.json"
    text = json.dumps(report.to_json(), indent=2)
    path.write_text(text + "\n", encoding="utf-8")
    last = runs / "last.json"
    tmp = runs / f".last.{os.getpid()}"
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(last)
    return path


def read_last(layout: Layout) -> dict[str, Any]:
    last = layout.runs() / "last.json"
    if not last.is_file():
        raise UsageError(f"no run report yet ({last} does not exist)", hint="run a build first")
    data: dict[str, Any] = json.loads(last.read_text(encoding="utf-8"))
    return data


def summary_table(data: dict[str, Any]) -> str:
    rows = [("component", "status", "key", "seconds", "steps")]
    for c in data["components"]:
        steps = " ".join(f"{k}={v:.1f}s" for k, v in c["steps"].items())
        rows.append((c["name"], c["status"], c["key"][:12], f"{c['seconds']:.1f}", steps))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    totals = data.get("totals", {})
    lines.append(
        f"{data['vendor']}: {totals.get('built', 0)} built, {totals.get('hit', 0)} from the store, "
        f"{totals.get('failed', 0)} failed in {data['seconds']:.1f}s"
    )
    return "\n".join(lines)
