"""A run report as one self-contained HTML page (``report --html``).

Top to bottom: the run (command, vendor, verdict, time); the timeline, an SVG with one row per
job slot and a bar per component split into its steps, the critical path outlined, store hits
and pulls on a row of their own; the components with their keys, status and step times; and
the audit of each wheel the run wrote (recomputed from the wheel file, :mod:`wheels.audit_html`).
Nothing is fetched when the page is viewed: inline SVG and CSS only.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder import __version__
from builder.engine import bound
from builder.engine.suite_report import suites_html
from builder.engine.trace import critical_components, lanes, span

STEP_COLOURS = {
    "configure": "#90cdf4",
    "build": "#3182ce",
    "install": "#68d391",
    "test-configure": "#d6bcfa",  # build --test's build beside the entry
    "test-build": "#b794f4",
    "test": "#9f7aea",
}
STATUS_COLOURS = {"built": "#3182ce", "failed": "#c53030", "pulled": "#805ad5", "hit": "#a0aec0"}
LEFT, ROW, WIDTH = 130, 34, 1100
NAME_WIDTH = 7.5  # pixels per character of a 12px sans-serif name, generously
TARGET = 8  # the narrowest bar a pointer can rest on, in pixels
SETTLED = 11  # characters of a name on a store hit's or pull's box


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render(report: Mapping[str, Any]) -> str:
    from wheels.audit_html import audit_section, page

    components = list(report.get("components", []))
    verdict = "ok" if report.get("ok") else "FAILED"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.get("started", 0)))
    title = f"infini-stack {report['command']} --vendor {report['vendor']}: {verdict}"
    subtitle = (
        f"{_e(report.get('manifest', ''))} at {_e(when)}, {float(report.get('seconds', 0)):.1f} s, "
        f"{_e(report.get('jobs', 0))} jobs; infini-stack {_e(__version__)}"
    )
    subtitle += "".join(f"<br>{_e(line)}" for line in bound.lines(report))
    suites = suites_html(components)
    suites_link = "<a href='#suites'>Suites</a>" if suites else ""
    body = (
        "<nav><a href='#timeline'>Timeline</a><a href='#components'>Components</a>"
        f"<a href='#wheels'>Wheels</a>{suites_link}</nav><main>"
        f"<section id='timeline'><h2>Timeline</h2>{timeline_svg(components)}</section>"
        f"<section id='components'><h2>Components</h2>{components_table(components)}</section>"
        f"<section id='wheels'><h2>Wheels</h2>{audit_section(audits(report))}</section>"
        f"{suites}{check_section(report)}{sanitizer_section(report)}</main>"
    )
    return page(title, body, subtitle)


def sanitizer_section(report: Mapping[str, Any]) -> str:
    """The first lines of each sanitizer report (report.findings_lines), where there are any."""
    from builder.engine.report import findings_lines

    lines = findings_lines(report)
    if not lines:
        return ""
    text = _e("\n".join(lines))
    return f"<section id='sanitizers'><h2>Sanitizers</h2><pre>{text}</pre></section>"


def check_section(report: Mapping[str, Any]) -> str:
    """The runtime check's cases, where a release ran it (its stage records their rows and the
    columns' names)."""
    from builder.engine.report import stages_of

    parts = []
    for tag, check in stages_of(report.get("release") or {}, "check"):
        rows = check.get("rows")
        if not rows:
            continue
        columns = check.get("columns") or list(rows[0])
        head = f"<h3>{html.escape(tag)}</h3>" if tag else ""
        parts.append(head + table_html(rows, columns))
    if not parts:
        return ""
    return f"<section id='check'><h2>Check</h2>{''.join(parts)}</section>"


def table_html(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The check's cases as an HTML table, every cell escaped."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def audits(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The audit JSON of every wheel the run names, recomputed from the wheel files."""
    from wheels.audit import audit_wheel, infer_vendor, to_json
    from wheels.policy import load_vendor_policy

    out = []
    for name in report.get("wheels", []):
        path = Path(name)
        if not path.is_file():
            out.append({"path": name, "ok": False, "violations": [_gone(name)], "elfs": []})
            continue
        audit = audit_wheel(path, load_vendor_policy(infer_vendor(path)))
        out += to_json([audit])["wheels"]
    return out


def _gone(name: str) -> dict[str, Any]:
    return {"code": "missing", "member": None, "message": f"{name} is no longer there"}


def timeline_svg(components: Sequence[Mapping[str, Any]]) -> str:
    """One row per job slot, a bar per component split into its steps; the critical path
    outlined in red; hits and pulls that took no slot on the first row."""
    timed = sorted((s, c) for c in components if (s := span(c)) is not None)
    slots = lanes([s for s, _ in timed])
    settled = [c for c in components if span(c) is None and c["status"] in ("hit", "pulled")]
    end = max([e for (_, e), _ in timed] or [1.0])
    scale = (WIDTH - LEFT - 20) / max(end, 1e-3)
    rows = max(slots, default=-1) + 2
    height = 40 + rows * ROW
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' id='timeline-svg' width='{WIDTH}' "
        f"height='{height}' viewBox='0 0 {WIDTH} {height}' font-family='sans-serif' "
        "font-size='12'>",
        *_axis(end, scale, height),
        f"<text x='8' y='{20 + ROW * 0.6}'>store</text>",
        *_settled(settled),
    ]
    critical = set(critical_components(components))
    parts += [
        f"<text class='lane' x='8' y='{20 + (slot + 1) * ROW + ROW * 0.6}'>slot {slot + 1}</text>"
        for slot in sorted(set(slots))
    ]
    for index, (slot, ((start, stop), c)) in enumerate(zip(slots, timed, strict=True)):
        y = 20 + (slot + 1) * ROW
        later = zip(timed[index + 1 :], slots[index + 1 :], strict=True)
        edge = min((LEFT + t[0] * scale for (t, _), lane in later if lane == slot), default=WIDTH)
        x, width = LEFT + start * scale, (stop - start) * scale
        bar = Bar(x, y + 4, width, room=edge - 4 - x - max(width, 2))  # to the next bar or edge
        parts += _bar(c, bar, scale, critical)
    return f"<div class='timeline'>{''.join(parts)}</svg></div>{_timeline_legend()}"


@dataclass(frozen=True)
class Bar:
    """Where a component's bar is drawn, and how much free room its lane has after it."""

    x: float
    y: float
    width: float
    room: float


def _axis(end: float, scale: float, height: int) -> list[str]:
    step = next((s for s in (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600) if end / s <= 12), 1200)
    ticks = []
    t = 0.0
    while t <= end + 1e-9:
        x = LEFT + t * scale
        ticks.append(
            f"<line x1='{x:.1f}' y1='16' x2='{x:.1f}' y2='{height - 4}' stroke='#e2e8f0'/>"
            f"<text x='{x + 2:.1f}' y='12' fill='#718096'>{t:g}s</text>"
        )
        t += step
    return ticks


def _settled(settled: Sequence[Mapping[str, Any]]) -> list[str]:
    parts = []
    for i, c in enumerate(settled):
        x = LEFT + i * 92
        colour = STATUS_COLOURS.get(c["status"], "#a0aec0")
        parts.append(
            f"<g class='settled'><title>{_e(c['name'])}: {_e(c['status'])} "
            f"({_e(c['key'][:12])})</title><rect x='{x}' y='{20 + 5}' width='86' "
            f"height='{ROW - 10}' rx='4' fill='{colour}'/><text x='{x + 5}' y='{20 + ROW * 0.6}' "
            f"fill='#fff'>{_e(_clip(c['name'], SETTLED))}</text></g>"
        )
    return parts


def _clip(name: str, most: int) -> str:
    """``name``, or its start and an ellipsis when longer than ``most`` (the tooltip has it)."""
    return name if len(name) <= most else name[: most - 1] + "…"


def _bar(c: Mapping[str, Any], bar: Bar, scale: float, critical: set[str]) -> list[str]:
    """A component's bar and steps, its name inside it, or after it where its lane has room,
    else only in the tooltip; a bar too narrow to point at gets a wider transparent target."""
    colour = STATUS_COLOURS.get(c["status"], "#718096")
    on_path = c["name"] in critical
    x, y, width = bar.x, bar.y, max(bar.width, 2)
    parts = [
        f"<g class='component{' critical' * on_path}' data-component='{_e(c['name'])}'>"
        f"<title>{_e(c['name'])}: {_e(c['status'])} in {float(c.get('seconds', 0)):.2f} s"
        f"{' (critical path)' * on_path}</title>"
        f"<rect x='{x:.1f}' y='{y}' width='{width:.1f}' height='{ROW - 8}' "
        f"fill='{colour}' opacity='0.25'/>"
    ]
    at = float(c["started"])
    for step, took in c.get("steps", {}).items():
        at = float(c.get("step_started", {}).get(step, at))
        sx = LEFT + at * scale
        parts.append(
            f"<rect class='step' x='{sx:.1f}' y='{y + 3}' width='{max(float(took) * scale, 1):.1f}'"
            f" height='{ROW - 14}' fill='{STEP_COLOURS.get(step, '#a0aec0')}'>"
            f"<title>{_e(c['name'])} {_e(step)}: {float(took):.2f} s</title></rect>"
        )
        at += float(took)
    if on_path:
        parts.append(
            f"<rect x='{x:.1f}' y='{y}' width='{width:.1f}' height='{ROW - 8}' "
            "fill='none' stroke='#c53030' stroke-width='2.5'/>"
        )
    if width < TARGET:  # something a pointer can rest on, for the tooltip
        parts.append(
            f"<rect class='target' x='{x + width / 2 - TARGET / 2:.1f}' y='{y}' width='{TARGET}' "
            f"height='{ROW - 8}' fill='transparent'/>"
        )
    label = NAME_WIDTH * len(c["name"]) + 8
    if width >= label:
        parts.append(f"<text x='{x + 4:.1f}' y='{y + ROW * 0.55:.1f}'>{_e(c['name'])}</text>")
    elif bar.room >= label:
        parts.append(
            f"<text class='outside' x='{x + width + 4:.1f}' y='{y + ROW * 0.55:.1f}' "
            f"fill='#4a5568'>{_e(c['name'])}</text>"
        )
    parts.append("</g>")
    return parts


def _timeline_legend() -> str:
    steps = "".join(
        f"<span><svg width='12' height='12'><rect width='12' height='12' fill='{c}'/></svg> "
        f"{_e(s)}</span>"
        for s, c in STEP_COLOURS.items()
    )
    return (
        f"<p class='legend'>{steps}<span><svg width='12' height='12'><rect width='12' "
        "height='12' fill='none' stroke='#c53030' stroke-width='3'/></svg> critical path</span>"
        "</p>"
    )


def components_table(components: Sequence[Mapping[str, Any]]) -> str:
    steps = [s for s in STEP_COLOURS if any(s in c.get("steps", {}) for c in components)]
    head = "".join(f"<th>{_e(s)} s</th>" for s in steps)
    rows = []
    for c in components:
        cells = "".join(
            f"<td class='num'>{c['steps'][s]:.2f}</td>" if s in c.get("steps", {}) else "<td></td>"
            for s in steps
        )
        started = "" if c.get("started") is None else f"{float(c['started']):.2f}"
        note = c.get("error") or ", ".join(f"{s} reused" for s in c.get("reused", []))
        rows.append(
            f"<tr><td>{_e(c['name'])}</td><td>{_e(c['status'])}</td>"
            f"<td><code title='{_e(c['key'])}'>{_e(c['key'][:16])}</code></td>"
            f"<td class='num'>{started}</td><td class='num'>{float(c.get('seconds', 0)):.2f}</td>"
            f"{cells}<td class='num'>{_e(c.get('jobs') or '')}</td><td>{_e(note)}</td></tr>"
        )
    return (
        "<table id='components-table'><tr><th>component</th><th>status</th><th>key</th>"
        f"<th>started s</th><th>seconds</th>{head}<th>jobs</th><th>note</th></tr>"
        f"{''.join(rows)}</table>"
    )


def write(report: Mapping[str, Any], target: Path) -> Path:
    text = render(report)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
