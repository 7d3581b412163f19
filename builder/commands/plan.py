"""``infini-stack plan``: print exactly what ``build`` would run, per component."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from builder.commands.common import (
    add_json,
    add_plan_options,
    plan_request,
    print_json,
    stack_request,
)
from builder.core import termwrap
from builder.core.proc import quote
from builder.manifest.model import source_label
from builder.plan import Plan, Step, to_json
from builder.plan_suites import PlannedSuite, PlannedTest


def configure(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from builder.pipeline.context import open_context, plan_for

    # The suites too: `build --test` and `release` run them (they change no key).
    request = dataclasses.replace(plan_request(args), suites=True)
    plan = plan_for(open_context(stack_request(args)), request)
    if args.json:
        print_json(to_json(plan))
    else:
        print(render(plan, termwrap.terminal_width(sys.stdout)))
    return 0


def render(plan: Plan, width: int | None = None) -> str:
    """The plan as comments and shell commands. ``width`` (a terminal's): a command wider than
    it shows one CMake option (``-D``) a line, continued with ``\\`` and indented, and every
    line is wrapped to ``width``; ``None`` (pipes, files): one whole line per command."""
    lines = [f"# plan for vendor {plan.vendor} from {plan.stack.label} ({plan.jobs} jobs)"]
    for c in plan.components:
        lines.append("")
        lines.append(f"## {c.name}  key {c.short_key}")
        lines.append(f"#  source: {source_label(c.source)}")
        if reason := _departure(plan, c.name):
            lines.append(f"#  departs from the contract: {reason}")
        if c.depends:
            lines.append(f"#  after: {', '.join(c.depends)}")
        for patch in c.patches:
            lines.append(f"#  patch: {patch.name} (sha256 {patch.sha256[:12]}), applied in order")
        if c.env:
            lines.append("#  env: " + " ".join(f"{k}={v}" for k, v in c.env.items()))
        for step in c.steps:
            lines += _command(step, width)
        if c.test is not None:
            lines += _test(c.test, width)
        if c.suite is not None:
            lines += _suite(c.suite, width)
    return termwrap.fit("\n".join(lines), width)


def _command(step: Step, width: int | None) -> list[str]:
    """``step`` as one shell line, or, when wider than ``width``, one CMake option a line."""
    prefix = f"(cd {quote([str(step.cwd)])} && " if step.cwd else ""
    suffix = ")" if step.cwd else ""
    whole = f"{prefix}{quote(step.argv)}{suffix}"
    if width is None or len(whole) <= width:
        return [whole]
    groups: list[list[str]] = [[]]
    for arg in step.argv:
        if arg.startswith("-D") and groups[-1]:
            groups.append([])
        groups[-1].append(arg)
    if len(groups) == 1:
        return [whole]
    parts = [quote(group) for group in groups]
    lines = [prefix + parts[0], *(f"    {part}" for part in parts[1:])]
    return [f"{line} \\" for line in lines[:-1]] + [lines[-1] + suffix]


def _test(test: PlannedTest, width: int | None) -> list[str]:
    """The component's in-build test, as `build --test` runs it beside its entry."""
    lines = ["#  test (build --test), built beside the entry with its options (no key change):"]
    for step in test.steps:
        lines += _command(Step(kind="build", argv=step.argv), width)
    if test.command:
        lines += _command(Step(kind="build", argv=test.command, cwd=test.build_dir), width)
    return lines


def _suite(suite: PlannedSuite, width: int | None) -> list[str]:
    """The component's own suite, as `build --test` and `release` run it on its entry."""
    lines = ["#  suite (build --test, release), on the entry the wheel bundles:"]
    for step in suite.steps:
        lines += _command(Step(kind="build", argv=step.argv), width)
    if suite.package_dir is not None:
        lines.append(f"#  its module '{suite.target}' put in {suite.package_dir}")
    env = " ".join(f"{k}={quote([v])}" for k, v in suite.env.items())
    lines.append(f"(cd {quote([str(suite.cwd)])} && env {env} {quote(suite.argv)})")
    lines += [f"#  deselected: {d.test}: {d.reason}" for d in suite.deselected]
    return lines


def _departure(plan: Plan, name: str) -> str | None:
    """The manifest's reason when the pin this plan builds departs from the contract."""
    contract = plan.stack.contract
    component = plan.stack.components.get(name)
    if contract is None or component is None or name not in contract.pins:
        return None
    return component.reason_for(plan.vendor)
