"""Plans for the real stack.yaml, per vendor, asserted on the exact switches; planning is pure."""

from __future__ import annotations

import pytest

from builder.core.host import Toolkit
from builder.plan import ComponentPlan, to_json
from tests.planning import CUDA, PPU, REAL_ORDER, ROOT, defines, host, plan_for


def configure_argv(c: ComponentPlan) -> tuple[str, ...]:
    return next(s.argv for s in c.steps if s.kind == "configure")


def test_nvidia_plan_matches_upstream_builder_switches() -> None:
    plan = plan_for("nvidia", CUDA)
    rt, ops, ccl = defines(plan, "infinirt"), defines(plan, "infiniops"), defines(plan, "infiniccl")
    assert rt["WITH_CPU"] == "ON" and rt["WITH_NVIDIA"] == "ON"
    assert ops["WITH_NVIDIA"] == ops["WITH_CPU"] == ops["WITH_TORCH"] == "ON"
    # As upstream's builder: WITH_LINKED with an ops.json selection (linked flash attention).
    assert ops["WITH_LINKED"] == "ON" and ops["INFINI_OPS_SELECTION"] == "ops/nvidia.json"
    assert ops["INFINI_RT_ROOT"] == str(plan.get("infinirt").prefix)
    assert str(plan.get("infinirt").prefix) in ops["CMAKE_PREFIX_PATH"]
    assert ccl["WITH_NVIDIA"] == "ON" and ccl["WITH_NCCL"] == "ON"
    assert ccl["WITH_OMPI"] == ccl["WITH_MPICH"] == "OFF"
    assert ccl["AUTO_DETECT_DEVICES"] == ccl["AUTO_DETECT_BACKENDS"] == "OFF"
    for name in ("infinirt", "infiniops", "infiniccl"):
        d = defines(plan, name)
        assert d["CMAKE_CUDA_COMPILER"] == "/opt/cuda/bin/nvcc"
        assert d["CMAKE_CUDA_ARCHITECTURES"] == "80-real;86-real;89-real;90"
        assert d["CMAKE_BUILD_TYPE"] == "Release"


def test_nvidia_pins_infiniops_to_a_revision_with_with_linked() -> None:
    plan = plan_for("nvidia", CUDA)
    assert plan.get("infiniops").source.rev.startswith("1f6f9c2")  # type: ignore[union-attr]
    # cpu too: InfiniLM 9439ea6 includes base/copy.h, which the base pin 2962714 lacks.
    assert plan_for("cpu").get("infiniops").source.rev.startswith("1f6f9c2")  # type: ignore[union-attr]
    assert plan_for("moore").get("infiniops").source.rev.startswith("2962714")  # type: ignore[union-attr]


def test_plan_order_builds_runtime_first_and_infinilm_last() -> None:
    plan = plan_for("nvidia", CUDA)
    names = [c.name for c in plan.components]
    assert tuple(names) == REAL_ORDER
    assert plan.get("infinilm-runtime").depends == ("infinirt", "infiniops", "infiniccl")
    assert plan.get("infinilm").depends == (
        "infinilm-runtime",
        "infinirt",
        "infiniops",
        "infiniccl",
    )


def test_commands_are_cmake_ninja_configure_build_install() -> None:
    c = plan_for("cpu").get("infinirt")
    kinds = [s.kind for s in c.steps]
    assert kinds == ["configure", "build", "install"]
    argv = configure_argv(c)
    assert argv[:7] == ("cmake", "-S", str(c.source_dir), "-B", str(c.build_dir), "-G", "Ninja")
    assert c.steps[1].argv == ("cmake", "--build", str(c.build_dir), "--parallel", "8")


def test_thead_uses_the_newer_infinirt_with_with_thead_and_the_ppu_nvcc() -> None:
    plan = plan_for("thead", PPU)
    rt = plan.get("infinirt")
    assert rt.source.rev == "a38977e03f9fafd803c3a4bd0d5810c57bc5a46e"  # type: ignore[union-attr]
    assert rt.defines["WITH_THEAD"] == "ON"
    assert rt.defines["CMAKE_CUDA_COMPILER"] == "/opt/ppu/CUDA_SDK/bin/nvcc"
    assert rt.defines["CMAKE_CUDA_ARCHITECTURES"] == "80"
    assert plan.get("infinirt").env["THEAD_CUDA_ROOT"] == "/opt/ppu/CUDA_SDK"
    assert plan_for("nvidia", CUDA).get("infinirt").source.rev.startswith("08677bb")  # type: ignore[union-attr]


def test_thead_plan_without_sdk_points_at_upstreams_default_location() -> None:
    rt = plan_for("thead").get("infinirt")
    assert rt.defines["CMAKE_CUDA_COMPILER"] == "/usr/local/PPU_SDK/CUDA_SDK/bin/nvcc"


def test_moore_plan_uses_musa_switches_and_mccl() -> None:
    plan = plan_for("moore")
    assert defines(plan, "infinirt")["WITH_MOORE"] == "ON"
    assert defines(plan, "infiniops")["WITH_MOORE"] == "ON"
    ccl = defines(plan, "infiniccl")
    assert ccl["WITH_MOORE"] == ccl["WITH_MCCL"] == "ON"
    assert ccl["WITH_OMPI"] == "OFF"
    assert defines(plan, "infinirt")["MUSA_ROOT"] == "/usr/local/musa"
    assert "WITH_NVIDIA" not in defines(plan, "infinirt")


def test_cpu_plan_limits_operators_and_uses_openmpi() -> None:
    plan = plan_for("cpu")
    ops = defines(plan, "infiniops")
    assert ops["INFINI_OPS_OPS"].split(",") == [
        "add", "cast", "cat", "causal_softmax", "gemm", "linear", "mul", "relu", "rms_norm",
        "silu", "silu_and_mul", "swiglu", "top_k_top_p_sampling_from_logits",
    ]  # fmt: skip
    assert defines(plan, "infinilm-runtime")["INFINILM_SKIP_MISSING_OPS"] == "ON"
    assert "INFINILM_SKIP_MISSING_OPS" not in defines(plan_for("nvidia", CUDA), "infinilm-runtime")
    assert ops["WITH_CPU"] == "ON" and "WITH_NVIDIA" not in ops
    assert defines(plan, "infiniccl")["WITH_OMPI"] == "ON"
    assert "CMAKE_CUDA_COMPILER" not in defines(plan, "infinirt")


def test_infinilm_is_built_from_the_cmake_project_in_components() -> None:
    lm = plan_for("nvidia", CUDA).get("infinilm")
    assert lm.cmake_source == ROOT / "components" / "infinilm"
    assert lm.defines["INFINILM_SOURCE_DIR"] == str(lm.source_dir)
    assert lm.defines["Python_EXECUTABLE"] == "/usr/bin/python3"
    assert lm.defines["pybind11_DIR"] == "/pb/cmake"
    for var, dep in (
        ("INFINI_RT_ROOT", "infinirt"),
        ("INFINI_OPS_ROOT", "infiniops"),
        ("INFINI_CCL_ROOT", "infiniccl"),
    ):
        assert lm.defines[var] == str(plan_for("nvidia", CUDA).get(dep).prefix)
    runtime = plan_for("nvidia", CUDA).get("infinilm-runtime")
    assert lm.defines["INFINILM_RUNTIME_ROOT"] == str(runtime.prefix)
    assert (lm.defines["INFINILM_PART"], runtime.defines["INFINILM_PART"]) == (
        "extensions",
        "runtime",
    )
    # One checkout: the runtime builds InfiniLM's pin, the same CMake project.
    assert runtime.source == lm.source and runtime.cmake_source == lm.cmake_source


def test_keys_differ_per_vendor_and_are_stable() -> None:
    a, b = plan_for("cpu"), plan_for("cpu")
    assert [c.key for c in a.components] == [c.key for c in b.components]
    assert a.get("infinirt").key != plan_for("nvidia", CUDA).get("infinirt").key


def test_key_follows_dependencies_and_toolkit_but_not_jobs() -> None:
    base = plan_for("nvidia", CUDA)
    other_cuda = Toolkit(
        root=CUDA.root, compiler=CUDA.compiler, version="12.8", found=True, source="CUDA_HOME"
    )
    assert plan_for("nvidia", other_cuda).get("infiniops").key != base.get("infiniops").key
    assert plan_for("nvidia", CUDA, jobs=1).get("infiniops").key == base.get("infiniops").key


def test_selecting_a_component_plans_it_with_its_dependencies() -> None:
    plan = plan_for("cpu", select=("infiniops",))
    assert [c.name for c in plan.components] == ["infinirt", "infiniops"]
    nvidia = plan_for("nvidia", CUDA, select=("infiniops",))
    assert [c.name for c in nvidia.components] == ["infinirt", "cutlass", "infiniops"]


def test_plan_json_carries_the_same_commands() -> None:
    plan = plan_for("cpu")
    data = to_json(plan)
    assert [c["name"] for c in data["components"]] == [c.name for c in plan.components]
    assert data["components"][0]["steps"][0]["argv"] == list(configure_argv(plan.components[0]))


@pytest.mark.parametrize("vendor", ["cpu", "nvidia", "moore", "thead", "ali"])
def test_cli_plan_prints_every_component_for_each_vendor(cli, vendor: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("plan", "--manifest", ROOT / "stack.yaml", "--vendor", vendor)
    assert result.code == 0
    for name in ("infinirt", "infiniops", "infiniccl", "infinilm"):
        assert f"## {name}" in result.out
    assert "cmake -S" in result.out


def test_cli_plan_unknown_vendor_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("plan", "--manifest", ROOT / "stack.yaml", "--vendor", "nvdia")
    assert result.code == 2
    assert "did you mean 'nvidia'" in result.err


def test_selecting_or_locking_a_component_outside_the_vendors_stack_is_a_usage_error(cli) -> None:  # type: ignore[no-untyped-def]
    from builder.core.errors import UsageError
    from builder.manifest.loader import load_stack
    from builder.sources.lock import source_for

    result = cli("plan", "--manifest", ROOT / "stack.yaml", "--vendor", "cpu", "-c", "cutlass")
    assert result.code == 2
    assert "component 'cutlass' is not in cpu's stack" in result.err and "only for nvidia" in (
        result.err
    )
    with pytest.raises(UsageError, match="not in moore's stack: nothing to lock"):
        source_for(load_stack(ROOT / "stack.yaml"), "cutlass", "moore")


def test_compiler_flags_from_the_environment_change_the_key() -> None:
    from dataclasses import replace

    plain = plan_for("cpu")
    flagged = plan_for("cpu", facts=replace(host(), env={"CXXFLAGS": "-O0"}))
    unrelated = plan_for("cpu", facts=replace(host(), env={"HOME": "/x"}))
    assert flagged.get("infinirt").key != plain.get("infinirt").key
    assert unrelated.get("infinirt").key == plain.get("infinirt").key


def test_provider_fingerprints_reach_only_the_components_that_use_them() -> None:
    from dataclasses import replace

    before = replace(
        host(CUDA),
        component_providers={"infiniccl": {"nccl": "2.27@/a"}},
        component_hints={"infiniccl": {"NCCL_LIB": "/a/libnccl.so.2"}},
    )
    after = replace(
        host(CUDA),
        component_providers={"infiniccl": {"nccl": "2.28@/b"}},
        component_hints={"infiniccl": {"NCCL_LIB": "/b/libnccl.so.2"}},
    )
    a = plan_for("nvidia", facts=before)
    b = plan_for("nvidia", facts=after)
    assert a.get("infiniccl").key != b.get("infiniccl").key
    assert a.get("infiniccl").defines["NCCL_LIB"] == "/a/libnccl.so.2"
    assert "NCCL_LIB" not in a.get("infinirt").defines
    assert a.get("infinirt").key == b.get("infinirt").key
