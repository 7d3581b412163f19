"""``check`` on its own: the vendor's runtime check of a built wheel, on the vendor's device."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from builder.checks.runtime import CheckResult, find_device, run_check
from builder.core.errors import EXIT_PREFLIGHT, CheckError, StackError, UsageError
from builder.manifest.model import Stack
from builder.pipeline.context import load_stack


@dataclass(frozen=True, kw_only=True)
class CheckRequest:
    wheel: Path
    vendor: str | None = None  # None: the vendor the wheel's local version names
    manifest: Path | None = None
    python: str | None = None  # the target interpreter (default: this one)
    force_argmax: bool = False  # the script's engine samples by argmax: its statistics must fail
    jobs: int | None = None  # the check's children at once (None: as many as fit)
    sanitize: str | None = None  # None: the profile the wheel's local version names (+cpu.asan)


class NoDevice(StackError):
    """The vendor's device is not on this host: the check cannot run (not a pass)."""

    exit_code = EXIT_PREFLIGHT


def check_script(stack: Stack, vendor: str) -> Path:
    config = stack.vendors.get(vendor)
    if config is None or config.check is None:
        raise UsageError(
            f"{stack.label} declares no runtime check for {vendor}",
            hint=f"name a script in vendors.{vendor}.check",
        )
    return config.check


def wheel_vendor(wheel: Path, given: str | None) -> str:
    from builder.vendors import canonical_name
    from wheels.naming import vendor_of_wheel

    if given:
        return canonical_name(given)
    found = vendor_of_wheel(wheel.name)
    if found is None:
        raise UsageError(
            f"{wheel.name} names no vendor (no variant label or local version that is one's)",
            hint="pass --vendor",
        )
    return found


def run_check_request(request: CheckRequest) -> CheckResult:
    """Run the vendor's check against ``request.wheel``; NoDevice when it cannot run here."""
    from builder.checks.sanitized import wheel_profile
    from builder.vendors import get as get_vendor

    if not request.wheel.is_file():
        raise UsageError(f"no such wheel: {request.wheel}")
    profile = wheel_profile(request.wheel, request.sanitize)
    vendor = wheel_vendor(request.wheel, request.vendor)
    stack = load_stack(request.manifest)
    script = check_script(stack, vendor)
    device = find_device(get_vendor(vendor))
    if not device.present:
        raise NoDevice(f"check: not run ({device.what})")
    python = request.python or sys.executable
    require_installed(request.wheel, python)
    print(f"check: {script.name} on {device.what}", file=sys.stderr)
    return run_check(
        request.wheel,
        vendor,
        script,
        python,
        force_argmax=request.force_argmax,
        jobs=request.jobs,
        sanitize=profile,
        suppressions=stack.suppressions,
    )


def require_installed(wheel: Path, python: str) -> None:
    """The wheel's runtime requirements ``python`` lacks stop the check before it starts, with
    the pip line (exit 3), as release's preflight does: the check would fail at its import."""
    from builder.checks.requirements import requires_dist, unmet, unmet_error

    if missing := unmet(requires_dist(wheel), python):
        raise unmet_error(python, missing)


def failed(result: CheckResult) -> CheckError:
    tail = "\n".join(result.output.rstrip().splitlines()[-40:])
    return CheckError(f"{result.render()}; its output ends:\n{tail}")
