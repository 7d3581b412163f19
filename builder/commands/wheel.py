"""``infini-stack wheel``: build (store hits are free), assemble the vendor's wheel, audit it."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from builder.commands.build import build_plan, launcher_for
from builder.commands.build import configure as configure_build
from builder.commands.common import Context, context_from, plan_from
from builder.errors import AuditError, UsageError
from builder.plan import Plan
from builder.vendors import get as get_vendor
from wheels.assemble import DEFAULT_EPOCH, DistLibrary, WheelInputs, build_wheel
from wheels.naming import wheel_name

NAME = "wheel"
HELP = "build the stack, then package and audit the vendor's wheel into dist/"


def configure(parser: argparse.ArgumentParser) -> None:
    configure_build(parser)
    parser.add_argument("--out", "-o", type=Path, default=Path("dist"),
                        help="where the wheel is written (default: ./dist)")


def run(args: argparse.Namespace) -> int:
    ctx = context_from(args)
    spec = ctx.stack.wheel
    if spec is None:
        raise UsageError(f"{ctx.stack.label} has no 'wheel' section")
    if not args.component:
        args.component = [spec.component, *spec.bundle]
    plan = plan_from(args, ctx)
    build_plan(ctx, plan, launcher=launcher_for(args.launcher), command="wheel")
    path = make_wheel(ctx, plan, args.out)
    print(path)
    return 0


def supplied_libraries(vendor: str) -> dict[str, DistLibrary]:
    from wheels.policy import load_vendor_policy

    policy = load_vendor_policy(vendor)
    return {
        soname: DistLibrary(distribution=lib.distribution, dir=lib.dir)
        for soname, lib in policy.distributions.items()
    }


def make_wheel(ctx: Context, plan: Plan, out: Path) -> Path:
    """Assemble the wheel aside, audit it, and only then move it into ``out``."""
    spec = ctx.stack.wheel
    assert spec is not None
    settings = ctx.stack.vendors[ctx.vendor].settings
    local = get_vendor(ctx.vendor).local_version(ctx.host, settings)
    inputs = WheelInputs(
        spec=spec,
        name=wheel_name(spec.name, spec.version, local),
        prefixes={c.name: c.prefix for c in plan.components},
        supplied=supplied_libraries(ctx.vendor),
        epoch=int(os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_EPOCH)),
    )
    pending = ctx.layout.home / "wheels"
    pending.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pending) as tmp:
        wheel = build_wheel(inputs, Path(tmp))
        audit_or_keep(wheel, ctx.vendor, pending)
        out.mkdir(parents=True, exist_ok=True)
        target = out / wheel.name
        shutil.move(str(wheel), target)
    return target


def audit_or_keep(wheel: Path, vendor: str, keep_dir: Path) -> None:
    from wheels.audit import audit_wheel
    from wheels.audit_report import render_text
    from wheels.policy import load_vendor_policy

    result = audit_wheel(wheel, load_vendor_policy(vendor))
    if not result.ok:
        kept = keep_dir / f"rejected-{wheel.name}"
        shutil.copyfile(wheel, kept)
        raise AuditError(
            render_text([result]) + f"\nthe wheel failed its audit; it was kept at {kept}",
        )
