"""Planning the real stack.yaml against fixed host facts (no detection, no compiler)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.core.host import HostFacts, Toolkit
from builder.core.layout import Layout
from builder.manifest.loader import load_stack
from builder.plan import Plan, make_plan
from builder.sources.fetch import gather

ROOT = Path(__file__).resolve().parent.parent
CUDA = Toolkit(
    root=Path("/opt/cuda"),
    compiler=Path("/opt/cuda/bin/nvcc"),
    version="13.0",
    found=True,
    source="CUDA_HOME",
)
PPU = Toolkit(
    root=Path("/opt/ppu/CUDA_SDK"),
    compiler=Path("/opt/ppu/CUDA_SDK/bin/nvcc"),
    version="12.3",
    found=True,
    source="PPU_SDK_ROOT",
)
LAYOUT = Layout(home=Path("/h"), store_root=Path("/h/store"))
# The real stack.yaml's components in dependency order (cutlass: nvidia's stack only).
REAL_ORDER = ("infinirt", "cutlass", "infiniops", "infiniccl", "infinilm-runtime", "infinilm")


def host(toolkit: Toolkit | None = None) -> HostFacts:
    return HostFacts(
        python="/usr/bin/python3",
        python_version="3.11",
        soabi="cpython-311-x86_64-linux-gnu",
        pybind11_dir="/pb/cmake",
        pybind11_version="3.1.0",
        cpu_count=8,
        cxx="/usr/bin/g++",
        cxx_version="g++ 12.2.0",
        toolkit=toolkit,
    )


def plan_for(
    vendor: str,
    toolkit: Toolkit | None = None,
    *,
    root: Path = ROOT,
    facts: HostFacts | None = None,
    layout: Layout = LAYOUT,
    **kw: Any,
) -> Plan:
    """The plan of ``root``/stack.yaml (this repository's by default) for ``vendor``, on
    ``facts`` (by default ``host(toolkit)``)."""
    stack = load_stack(root / "stack.yaml")
    return make_plan(stack, vendor, facts or host(toolkit), gather(stack, vendor), layout, **kw)


def defines(plan: Plan, name: str) -> dict[str, str]:
    return dict(plan.get(name).defines)
