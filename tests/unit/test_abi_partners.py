"""ABI partners: the range a build pins, whether a specifier admits one ABI, the local version
that names torch, and the Requires-Dist lines the assembler writes (no compiler)."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from builder.manifest.loader import load_stack
from builder.pipeline.context import Context
from builder.pipeline.wheel import abi_partners, wheel_inputs
from builder.preflight import PreflightReport
from builder.providers.probe import ProviderResult
from tests.planning import CUDA, LAYOUT, ROOT, host, plan_for
from wheels.audit.abi_partners import abi_range, one_abi
from wheels.distinfo import pinned
from wheels.naming import partner_local, vendor_of_local, with_local


@pytest.mark.parametrize(
    ("distribution", "version", "expected"),
    [
        ("torch", "2.11.0+cu130", ">=2.11,<2.12"),
        ("Torch", "2.9.1", ">=2.9,<2.10"),
        ("flash-attn", "2.8.3", "==2.8.3"),
        ("flash_attn", "2.8.3+cu12torch2.11", "==2.8.3"),
    ],
)
def test_abi_range_is_the_minor_series_for_torch_and_the_version_otherwise(
    distribution: str, version: str, expected: str
) -> None:
    assert abi_range(distribution, version) == expected
    assert one_abi(distribution, SpecifierSet(expected))


@pytest.mark.parametrize(
    ("distribution", "specifier", "one"),
    [
        ("torch", "", False),
        ("torch", ">=2.11", False),
        ("torch", ">=2.11,<3", False),
        ("torch", ">=2.11,<2.12.1", False),
        ("torch", ">=2.10,<2.12", False),
        ("torch", "~=2.11", False),
        ("torch", ">=2.11,<2.12", True),
        ("torch", ">=2.11.1,<=2.11.9", True),
        ("torch", "~=2.11.0", True),
        ("torch", "==2.11.*", True),
        ("torch", "==2.11.0", True),
        ("flash-attn", ">=2.8,<2.9", False),
        ("flash-attn", "==2.8.*", False),
        ("flash-attn", "==2.8.3", True),
        ("flash-attn", "===2.8.3", True),
    ],
)
def test_one_abi_admits_only_a_pin_that_excludes_every_other_abi(
    distribution: str, specifier: str, one: bool
) -> None:
    assert one_abi(distribution, SpecifierSet(specifier)) is one


def test_the_local_version_names_the_torch_built_against_after_the_vendor() -> None:
    partners = {"torch": "2.11.0+cu130", "flash-attn": "2.8.3"}
    assert partner_local("cu130", partners) == "cu130.torch2.11"
    assert with_local("0.1.0", partner_local("cu130", partners)) == "0.1.0+cu130.torch2.11"
    assert vendor_of_local("0.1.0+cu130.torch2.11") == "nvidia"
    assert partner_local("cpu", {}) == "cpu"


def test_requires_dist_pins_each_partner_and_keeps_the_rest() -> None:
    partners = {"torch": "2.11.0+cu130", "flash-attn": "2.8.3"}
    lines = pinned(["torch", "numpy", "flash-attn", "torch"], partners)
    assert lines == ["torch>=2.11,<2.12", "numpy", "flash-attn==2.8.3"]
    (marked,) = pinned(['torch>=2.0; platform_machine == "x86_64"'], partners)
    assert marked == 'torch>=2.0,>=2.11,<2.12; platform_machine == "x86_64"'
    assert pinned(["torch"], {}) == ["torch"]


def preflighted(*results: ProviderResult) -> Context:
    """The real stack for nvidia, with a preflight that found ``results``."""
    stack = load_stack(ROOT / "stack.yaml")
    report = PreflightReport(
        vendor="nvidia", purpose="wheel", manifest="stack.yaml", python="python3",
        components=(), results=results, seconds=0.0,
    )  # fmt: skip
    return Context(stack, "nvidia", LAYOUT, host(CUDA), {}, preflight=report)


def test_the_partners_are_what_preflight_read_of_the_supplying_distributions() -> None:
    ctx = preflighted(
        ProviderResult(name="torch", status="found", version="2.11.0+cu130"),
        ProviderResult(name="linked:flash-attn", status="found", version="2.8.3"),
        ProviderResult(name="nccl", status="found", version="2.27.7"),  # no distribution's name
        ProviderResult(name="cmake", status="found", version="4.1.0"),
    )
    assert abi_partners(ctx) == {"torch": "2.11.0+cu130", "flash-attn": "2.8.3"}
    inputs = wheel_inputs(ctx, plan_for("nvidia", CUDA), 0)
    assert inputs.name.version == "0.1.0+cu130.torch2.11"
    assert inputs.partners == {"torch": "2.11.0+cu130", "flash-attn": "2.8.3"}
    missing = preflighted(ProviderResult(name="torch", status="missing"))
    assert abi_partners(missing) == {}
