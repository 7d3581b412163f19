"""A run against its physical bound: the CPU work it did over the cores it had.

A build (or a release) cannot end sooner than its CPU-seconds spread over every core; what it
takes beyond that is what did not overlap. The CPU-seconds are this process's and its children's
(``getrusage``: the compilers under Ninja under CMake, the second build of a release, the
check's interpreters, each counted once it has been waited for). ``report`` prints the line
:func:`render` makes; the HTML page and the trace show the same figures.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MEANINGFUL = 0.05  # seconds of bound below which wall / bound says nothing (a no-op build)


@dataclass(frozen=True, slots=True)
class Mark:
    """CPU-seconds used so far (this process and its waited-for children) and the wall clock."""

    cpu: float
    wall: float


def mark() -> Mark:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return Mark(cpu=cpu, wall=time.monotonic())


def cores() -> int:
    """The cores this process may run on (its affinity, else the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def since(start: Mark, end: Mark | None = None, *, cpus: int | None = None) -> dict[str, Any]:
    """The figures from ``start`` to ``end`` (now): CPU-seconds, cores, bound, wall, ratio."""
    end = end or mark()
    cpu, wall, n = round(end.cpu - start.cpu, 3), end.wall - start.wall, cpus or cores()
    bound = cpu / n  # of the CPU-seconds as reported, so that the figures agree to the digit
    return {
        "cpu_seconds": cpu,
        "cores": n,
        "bound_seconds": round(bound, 3),
        "wall_seconds": round(wall, 3),
        "ratio": round(wall / bound, 2) if bound >= MEANINGFUL else None,
    }


def render(figures: Mapping[str, Any], what: str = "build") -> str:
    """``build: 10060.0 CPU-seconds on 16 cores, bound 628.8s; wall 867.0s = 1.38x the bound``"""
    ratio = figures.get("ratio")
    against = f" = {ratio:.2f}x the bound" if ratio is not None else ""
    return (
        f"{what}: {figures['cpu_seconds']:.1f} CPU-seconds on {figures['cores']} cores, "
        f"bound {figures['bound_seconds']:.1f}s; wall {figures['wall_seconds']:.1f}s{against}"
    )


def lines(report: Mapping[str, Any]) -> list[str]:
    """The bound lines of a run report: its build's, and its release's when it was one."""
    found = []
    if report.get("cpu"):
        found.append(render(report["cpu"], "build"))
    release = report.get("release") or {}
    if release.get("cpu"):
        found.append(render(release["cpu"], "release"))
    return found
