"""Each component's own suite in the run report's words: the counts, the deselections with
their reasons, why tests were skipped, the slowest tests and the failures' first lines; as text
(the build's summary, ``report``) and as the HTML page's "Suites" section."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

COUNTS = ("passed", "failed", "errors", "skipped", "xfailed")
SHOWN = 5  # slowest tests and skip reasons the text names


def ran(components: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The components whose suite ran (or started) in this run."""
    return [c for c in components if c.get("suite")]


def verdict(suite: Mapping[str, Any]) -> str:
    """ok, FAILED, or interrupted (the run was stopped while the suite ran)."""
    if suite.get("interrupted"):
        return "interrupted"
    return "ok" if suite.get("ok") else "FAILED"


def counts_text(suite: Mapping[str, Any]) -> str:
    counts = suite.get("counts", {})
    text = ", ".join(f"{counts.get(k, 0)} {k}" for k in COUNTS if counts.get(k) or k == "passed")
    if suite.get("deselected"):
        text += f", {len(suite['deselected'])} deselected"
    return text


def suites_text(data: Mapping[str, Any]) -> str:
    """The suites of a run, as the build's summary and ``report`` print them ("" if none)."""
    lines: list[str] = []
    for c in ran(data.get("components", [])):
        suite = c["suite"]
        seconds = float(suite.get("seconds", 0))
        workers = suite.get("workers", 1)
        lines.append(
            f"suite {c['name']}: {verdict(suite)}, {counts_text(suite)} in {seconds:.1f}s "
            f"({workers} worker{'s' if workers != 1 else ''})"
        )
        lines += [f"  deselected {d['test']}: {d['reason']}" for d in suite.get("deselected", [])]
        lines += [
            f"  skipped {r['count']}: {r['reason']}" for r in suite.get("skip_reasons", [])[:SHOWN]
        ]
        lines += [
            f"  slow {s['seconds']:.2f}s {s['test']}" for s in suite.get("slowest", [])[:SHOWN]
        ]
        for failure in suite.get("failures", []):
            lines.append(f"  FAILED {failure['test']}")
            lines += [f"    | {line}" for line in failure.get("output", "").splitlines()]
        if suite.get("log"):
            lines.append(f"  log: {suite['log']}")
    return "\n".join(lines)


def suites_html(components: Sequence[Mapping[str, Any]]) -> str:
    """The HTML page's "Suites" section ("" when no suite ran)."""
    shown = ran(components)
    if not shown:
        return ""
    parts = ["<section id='suites'><h2>Suites</h2>"]
    for c in shown:
        suite = c["suite"]
        parts.append(
            f"<h3>{_e(c['name'])}: {verdict(suite)}</h3><p>{_e(counts_text(suite))} in "
            f"{float(suite.get('seconds', 0)):.1f} s, {_e(suite.get('workers', 1))} worker(s)</p>"
            f"<p><code>{_e(' '.join(suite.get('command', [])))}</code></p>"
        )
        parts.append(
            _table(("deselected", "reason"), suite.get("deselected", []), ("test", "reason"))
        )
        parts.append(
            _table(("skipped", "reason"), suite.get("skip_reasons", []), ("count", "reason"))
        )
        parts.append(_table(("slowest test", "s"), suite.get("slowest", []), ("test", "seconds")))
        for failure in suite.get("failures", []):
            parts.append(
                f"<p>FAILED <code>{_e(failure['test'])}</code></p>"
                f"<pre>{_e(failure.get('output', ''))}</pre>"
            )
    parts.append("</section>")
    return "".join(parts)


def _table(head: tuple[str, str], rows: Sequence[Mapping[str, Any]], keys: tuple[str, str]) -> str:
    if not rows:
        return ""
    cells = "".join(
        f"<tr><td>{_e(r.get(keys[0], ''))}</td><td>{_e(r.get(keys[1], ''))}</td></tr>" for r in rows
    )
    return f"<table><tr><th>{_e(head[0])}</th><th>{_e(head[1])}</th></tr>{cells}</table>"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
