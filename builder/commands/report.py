"""``infini-stack report``: print the last run report (a table, or the JSON itself); export it
as a Chrome trace (``--trace``) or one self-contained HTML page (``--html``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from builder.commands.common import add_home, add_json, layout_from, print_json


def configure(parser: argparse.ArgumentParser) -> None:
    add_home(parser)
    add_json(parser)
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="write the run as a Chrome trace-event file (open it in Perfetto or "
        "chrome://tracing): job slots, components, steps and each build's Ninja edges",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write one self-contained HTML page: the timeline, the components with keys and "
        "step times, and the audit of the wheels the run wrote",
    )


def run(args: argparse.Namespace) -> int:
    from builder.engine import bound, report

    data = report.read_last(layout_from(args))
    if args.trace or args.html:
        return _export(data, args.trace, args.html)
    if args.json:
        print_json(data)
        return 0
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data["started"]))
    verdict = "ok" if data.get("ok") else "FAILED"
    release = data.get("release") or {}
    if release.get("failed_stage"):
        verdict = f"FAILED at {release['failed_stage']} (exit {release.get('exit_code')})"
    print(f"{data['command']} --vendor {data['vendor']} of {data['manifest']} at {when}: {verdict}")
    print(report.summary_table(data))
    for line in bound.lines(data):
        print(line)
    if release:
        print("\n" + release_table(release))
    for c in data["components"]:
        if c["status"] == "failed" and c.get("error"):
            print(f"\n{c['name']}:\n{c['error']}")
    if data.get("interrupted"):
        print(f"\n{data['interrupted']}")
    return 0


def _export(data: dict[str, Any], trace_file: Path | None, html_file: Path | None) -> int:
    from builder.engine import html_report, trace

    if trace_file is not None:
        print(trace.write(data, trace_file))
    if html_file is not None:
        print(html_report.write(data, html_file))
    return 0


def release_table(release: dict[str, Any]) -> str:
    """The release's stages, each with its seconds and outcome, and where a failure's files are."""
    stages = release.get("stages", {})
    width = max([11, *(len(name) for name in stages)])
    lines = [f"{'stage':<{width}} seconds  outcome"]
    for name, stage in stages.items():
        outcome = "ok" if stage.get("ok", True) else f"FAILED (exit {stage.get('exit_code')})"
        if stage.get("ran") is False:
            outcome = f"not run ({stage.get('reason')})"
        if by := stage.get("proven_by"):  # verify: an earlier release built these bytes twice
            outcome += f" (proven by release {', '.join(sorted(set(by.values())))})"
        lines.append(f"{name:<{width}} {stage.get('seconds', 0):>7.1f}  {outcome}")
    if release.get("kept"):
        lines.append(f"kept: {release['kept']}")
    return "\n".join(lines)
