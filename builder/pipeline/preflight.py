"""``preflight`` on its own: what this host has and lacks for a vendor's build (or run)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from builder import preflight
from builder.core.host import HostFacts
from builder.pipeline.context import check_components, layout_for, load_stack
from builder.pipeline.requests import StackRequest
from builder.providers import linked
from builder.providers.probe import Purpose


def light_host(python: str | None) -> HostFacts:
    """The host facts preflight reads (interpreter, environment): no compiler or toolkit runs
    here, the providers do that themselves."""
    return HostFacts(
        python=python or sys.executable,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        soabi="",
        pybind11_dir=None,
        cpu_count=os.cpu_count() or 1,
        env=dict(os.environ),
    )


def run_preflight(
    request: StackRequest,
    components: tuple[str, ...] = (),
    *,
    purpose: Purpose = "build",
    python: str | None = None,
    linked_files: Sequence[Path] = (),
) -> preflight.PreflightReport:
    """Probe, record the report under the home, and return it (the caller decides the exit)."""
    from builder.manifest.loader import resolve_vendor

    stack = load_stack(request.manifest)
    vendor = resolve_vendor(stack, request.vendor)
    check_components(stack, vendor, components)
    specs = tuple(spec for path in linked_files for spec in linked.load(path))
    layout = layout_for(request.home, request.store)
    report = preflight.check(
        stack,
        vendor,
        light_host(python),
        components,
        purpose=purpose,
        linked=specs,
        wheel=not components,
        cache=layout.cache(),
    )
    preflight.record(report, layout)
    return report
