"""``infini-stack report``: print the last run report (a table, or the JSON itself)."""

from __future__ import annotations

import argparse
import time

from builder.commands.common import add_home, add_json, layout_from, print_json


def configure(parser: argparse.ArgumentParser) -> None:
    add_home(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from builder.engine import report

    data = report.read_last(layout_from(args))
    if args.json:
        print_json(data)
        return 0
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data["started"]))
    verdict = "ok" if data.get("ok") else "FAILED"
    print(f"{data['command']} --vendor {data['vendor']} of {data['manifest']} at {when}: {verdict}")
    print(report.summary_table(data))
    for c in data["components"]:
        if c["status"] == "failed" and c.get("error"):
            print(f"\n{c['name']}:\n{c['error']}")
    if data.get("interrupted"):
        print(f"\n{data['interrupted']}")
    return 0
