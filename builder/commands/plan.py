"""``infini-stack plan``: print exactly what ``build`` would run, per component."""

from __future__ import annotations

import argparse

from builder.commands.common import add_json, add_plan_options, context_from, plan_from, print_json
from builder.plan import Plan, source_label, to_json
from builder.proc import quote

NAME = "plan"
HELP = "print the configure/build/test/install commands build would run, in order"


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    ctx = context_from(args)
    plan = plan_from(args, ctx)
    if args.json:
        print_json(to_json(plan))
    else:
        print(render(plan))
    return 0


def render(plan: Plan) -> str:
    lines = [f"# plan for vendor {plan.vendor} from {plan.stack.label} ({plan.jobs} jobs)"]
    for c in plan.components:
        lines.append("")
        lines.append(f"## {c.name}  key {c.short_key}")
        lines.append(f"#  source: {source_label(c.source)}")
        if c.depends:
            lines.append(f"#  after: {', '.join(c.depends)}")
        if c.env:
            lines.append("#  env: " + " ".join(f"{k}={v}" for k, v in c.env.items()))
        for step in c.steps:
            prefix = f"(cd {quote([str(step.cwd)])} && " if step.cwd else ""
            suffix = ")" if step.cwd else ""
            lines.append(f"{prefix}{quote(step.argv)}{suffix}")
    return "\n".join(lines)
