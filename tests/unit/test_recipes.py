"""The real recipes (components/) through plans, per vendor: the exact switches upstream needs,
CUTLASS given offline, the operator selection, backends per vendor, and what a build fetches."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder import preflight
from builder.manifest.loader import load_stack
from builder.manifest.model import GitSource
from builder.plan import Plan
from tests.planning import CUDA, PPU, REAL_ORDER, ROOT, defines
from tests.planning import plan_for as planned

COMPONENTS = ROOT / "components"
CUTLASS_SHA = "087c84df83d254b5fb295a7a408f1a1d554085cf"
VENDORS = ("cpu", "nvidia", "moore", "thead")


def plan_for(vendor: str, *, tests: bool = False, select: tuple[str, ...] = ()) -> Plan:
    """The vendor's plan with its toolkit present."""
    toolkit = {"nvidia": CUDA, "thead": PPU}.get(vendor)
    return planned(vendor, toolkit, tests=tests, select=select)


# --- CUTLASS: given from a pinned component, never downloaded at configure time -----------------


def test_nvidia_infiniops_gets_cutlass_from_the_pinned_component_and_cannot_download() -> None:
    plan = plan_for("nvidia")
    cutlass = plan.get("cutlass")
    assert isinstance(cutlass.source, GitSource)
    assert cutlass.source.url == "https://github.com/NVIDIA/cutlass.git"
    assert cutlass.source.rev == CUTLASS_SHA
    assert cutlass.cmake_source == COMPONENTS / "cutlass"
    assert cutlass.defines["CUTLASS_SOURCE_DIR"] == str(cutlass.source_dir)
    ops = defines(plan, "infiniops")
    assert ops["FETCHCONTENT_SOURCE_DIR_CUTLASS"] == str(cutlass.prefix)
    assert ops["FETCHCONTENT_FULLY_DISCONNECTED"] == "ON"
    assert "cutlass" in plan.get("infiniops").depends


def test_cutlass_key_feeds_the_infiniops_key() -> None:
    plan = plan_for("nvidia")
    assert plan.get("infiniops").key_inputs["dependencies"]["cutlass"] == plan.get("cutlass").key


@pytest.mark.parametrize("vendor", ["cpu", "moore", "thead"])
def test_vendors_without_cuda_kernels_in_infiniops_leave_cutlass_out_of_their_stack(
    vendor: str,
) -> None:
    plan = plan_for(vendor)
    assert "cutlass" not in [c.name for c in plan.components]
    assert plan.get("infiniops").depends == ("infinirt",)
    assert "FETCHCONTENT_SOURCE_DIR_CUTLASS" not in defines(plan, "infiniops")
    assert "cutlass" not in plan.get("infiniops").key_inputs["dependencies"]


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_recipe_turns_off_configure_time_downloads(vendor: str) -> None:
    plan = plan_for(vendor)
    for name in ("infinirt", "infiniops", "infiniccl"):
        assert defines(plan, name)["FETCHCONTENT_FULLY_DISCONNECTED"] == "ON", name
    assert defines(plan, "infinirt")["INFINI_RT_BUILD_DOCS"] == "OFF"  # docs FetchContent
    assert defines(plan, "infiniops")["INFINI_OPS_BUILD_DOCS"] == "OFF"


# --- InfiniOps: vendor switch, InfiniRT from its entry, operator selection ----------------------


def test_cpu_operator_selection_is_limited_to_operators_with_cpu_kernels() -> None:
    ops = defines(plan_for("cpu"), "infiniops")
    # Exactly the operators with a kernel under src/native/cpu/ops/ at InfiniOps 1f6f9c2 that
    # InfiniOps' selection accepts (argmax, embedding, ... have none: configure would refuse).
    assert set(ops["INFINI_OPS_OPS"].split(",")) == {
        "add", "cast", "cat", "causal_softmax", "gemm", "linear", "mul", "relu", "rms_norm",
        "silu", "silu_and_mul", "swiglu", "top_k_top_p_sampling_from_logits",
    }  # fmt: skip
    assert ops["WITH_CPU"] == "ON"
    assert "WITH_NVIDIA" not in ops
    assert ops["WITH_TORCH"] == ops["WITH_LINKED"] == "OFF"


def test_nvidia_operator_selection_is_infinilms_ops_json_with_linked_flash_attention() -> None:
    ops = defines(plan_for("nvidia"), "infiniops")
    assert ops["INFINI_OPS_SELECTION"] == "ops/nvidia.json"
    assert "INFINI_OPS_OPS" not in ops  # the wrapper sets it from the selection
    assert ops["WITH_NVIDIA"] == ops["WITH_CPU"] == ops["WITH_TORCH"] == ops["WITH_LINKED"] == "ON"
    assert ops["INFINI_OPS_TORCH_OPS"] == "argmax"  # not all 500+ ATen wrappers
    selection = json.loads((COMPONENTS / "infiniops" / "ops" / "nvidia.json").read_text())
    slots = {op: entry["implementations"] for op, entry in selection.items()}
    # Slots: 0 native, 8 ATen, 16 linked.
    assert slots["flash_attn_with_kvcache"] == slots["flash_attn_varlen_func"] == [16]
    assert slots["argmax"] == [8]
    assert slots["topk_softmax"] == [0]  # native: vLLM's (linked) would need vllm installed
    # No NVIDIA implementation at 1f6f9c2: the CPU kernel, so that InfiniLM's calls link.
    assert slots["top_k_top_p_sampling_from_logits"] == [0]


def test_nvidia_declares_flash_attn_as_a_linked_provider_of_infiniops() -> None:
    stack = load_stack(ROOT / "stack.yaml")
    (spec,) = preflight.declared_linked(stack, "nvidia")
    assert (spec.name, spec.distribution, spec.library_glob) == (
        "flash-attn",
        "flash-attn",
        "flash_attn_2_cuda*.so",
    )
    assert spec.components == ("infiniops",)
    assert {s.split("(")[0] for s in spec.required_symbols} == {
        "flash::mha_fwd_kvcache",
        "flash::mha_varlen_fwd",
    }
    assert preflight.declared_linked(stack, "cpu") == ()


def copy_of_the_repository(tmp_path: Path) -> Path:
    """stack.yaml and components/ copied to ``tmp_path``, to be edited there."""
    shutil.copy(ROOT / "stack.yaml", tmp_path / "stack.yaml")
    shutil.copytree(ROOT / "components", tmp_path / "components")
    return tmp_path


def test_operator_selection_is_an_input_of_the_infiniops_key(tmp_path: Path) -> None:
    cpu = planned("cpu").get("infiniops").key_inputs["options"]
    assert cpu["INFINI_OPS_OPS"] == defines(plan_for("cpu"), "infiniops")["INFINI_OPS_OPS"]
    before = planned("nvidia", CUDA)
    # The selection file's content counts, not only its name: edit it in a copy of the repo.
    copy_of_the_repository(tmp_path)
    selection = tmp_path / "components" / "infiniops" / "ops" / "nvidia.json"
    slots = json.loads(selection.read_text())
    slots["gemm"] = {"implementations": [8]}
    selection.write_text(json.dumps(slots))
    after = planned("nvidia", CUDA, root=tmp_path)
    assert after.get("infiniops").key != before.get("infiniops").key
    assert after.get("infinirt").key == before.get("infinirt").key


@pytest.mark.parametrize("vendor", VENDORS)
def test_infiniops_finds_infinirt_through_its_store_entry(vendor: str) -> None:
    plan = plan_for(vendor)
    ops = defines(plan, "infiniops")
    assert ops["INFINI_RT_ROOT"] == str(plan.get("infinirt").prefix)
    assert ops["AUTO_DETECT_DEVICES"] == ops["AUTO_DETECT_BACKENDS"] == "OFF"
    assert ops["GENERATE_PYTHON_BINDINGS"] == "OFF"


def test_infiniops_builds_through_the_wrapper_that_leaves_examples_out() -> None:
    ops = plan_for("cpu").get("infiniops")
    assert ops.cmake_source == COMPONENTS / "infiniops"
    assert ops.defines["INFINIOPS_SOURCE_DIR"] == str(ops.source_dir)
    wrapper = (COMPONENTS / "infiniops" / "CMakeLists.txt").read_text()
    assert 'add_subdirectory("${INFINIOPS_SOURCE_DIR}" infiniops)' in wrapper
    assert "EXCLUDE_FROM_ALL TRUE" in wrapper


def test_infiniops_fetches_none_of_its_submodules() -> None:
    ops = plan_for("cpu").get("infiniops")
    assert ops.submodules == frozenset()
    assert plan_for("cpu").get("infinilm").submodules is None  # all of them


def test_thead_infiniops_uses_the_cuda_like_backend_with_the_ppu_nvcc() -> None:
    ops = defines(plan_for("thead"), "infiniops")
    assert ops["WITH_NVIDIA"] == "ON"
    assert "WITH_THEAD" not in ops  # InfiniOps has none
    assert ops["CMAKE_CUDA_COMPILER"] == "/opt/ppu/CUDA_SDK/bin/nvcc"


def test_moore_infiniops_uses_musa() -> None:
    ops = defines(plan_for("moore"), "infiniops")
    assert ops["WITH_MOORE"] == "ON" and "WITH_NVIDIA" not in ops


# --- InfiniRT --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "switch"),
    [("cpu", None), ("nvidia", "WITH_NVIDIA"), ("moore", "WITH_MOORE"), ("thead", "WITH_THEAD")],
)
def test_infinirt_vendor_switch(vendor: str, switch: str | None) -> None:
    rt = defines(plan_for(vendor), "infinirt")
    assert rt["WITH_CPU"] == "ON"
    assert rt["AUTO_DETECT_DEVICES"] == "OFF"
    gpu = {k for k in ("WITH_NVIDIA", "WITH_MOORE", "WITH_THEAD") if rt.get(k) == "ON"}
    assert gpu == ({switch} if switch else set())


def test_infinirt_runs_ctest_only_when_tests_are_asked_for() -> None:
    plain = plan_for("cpu").get("infinirt")
    assert plain.defines["INFINI_RT_BUILD_TESTING"] == "OFF"
    assert [s.kind for s in plain.steps] == ["configure", "build", "install"]
    assert plain.test is None
    tested = plan_for("cpu", tests=True).get("infinirt")
    assert tested.test is not None
    assert "-DINFINI_RT_BUILD_TESTING=ON" in tested.test.steps[0].argv
    assert tested.test.command == ("ctest", "--output-on-failure")


def test_infinirt_generator_runs_with_the_planned_interpreter() -> None:
    assert defines(plan_for("cpu"), "infinirt")["Python_EXECUTABLE"] == "/usr/bin/python3"


# --- InfiniCCL: one backend per vendor, nothing detected from the host ------------------------


@pytest.mark.parametrize(
    ("vendor", "backend"),
    [("cpu", "WITH_OMPI"), ("nvidia", "WITH_NCCL"), ("moore", "WITH_MCCL"), ("thead", "WITH_OMPI")],
)
def test_infiniccl_backend_per_vendor(vendor: str, backend: str) -> None:
    ccl = defines(plan_for(vendor), "infiniccl")
    backends = {k for k in ("WITH_OMPI", "WITH_MPICH", "WITH_NCCL", "WITH_MCCL") if ccl[k] == "ON"}
    assert backends == {backend}
    assert ccl["AUTO_DETECT_DEVICES"] == ccl["AUTO_DETECT_BACKENDS"] == "OFF"
    assert ccl["CMAKE_SHARED_LINKER_FLAGS"] == "-Wl,--no-undefined"


def test_infiniccl_examples_are_built_only_for_tests() -> None:
    assert defines(plan_for("nvidia"), "infiniccl")["BUILD_EXAMPLES"] == "OFF"
    tested = plan_for("nvidia", tests=True).get("infiniccl")
    assert tested.defines["BUILD_EXAMPLES"] == "OFF"  # the entry: the examples beside it
    assert tested.test is not None and tested.test.options["BUILD_EXAMPLES"] == "ON"


def test_moore_infiniccl_is_pinned_to_a_revision_with_mccl_on_moore() -> None:
    plan = plan_for("moore")
    ccl = plan.get("infiniccl")
    assert isinstance(ccl.source, GitSource)
    assert ccl.source.rev == "5185908cae5734354fea4b0226642ae3562a29b8"
    assert ccl.defines["WITH_MOORE"] == "ON"
    other = plan_for("cpu").get("infiniccl").source
    assert isinstance(other, GitSource) and other.rev.startswith("1f3e24a")


# --- InfiniLM -----------------------------------------------------------------------------------


def test_infinilm_matches_pytorchs_abi_on_nvidia_only() -> None:
    for part in ("infinilm-runtime", "infinilm"):  # one ABI across the runtime's interface
        assert defines(plan_for("nvidia"), part)["INFINILM_CXX11_ABI"] == "TORCH"
        assert defines(plan_for("cpu"), part)["INFINILM_CXX11_ABI"] == ""


@pytest.mark.parametrize(
    ("vendor", "cuda"), [("cpu", "OFF"), ("nvidia", "ON"), ("moore", "OFF"), ("thead", "ON")]
)
def test_infinilm_cuda_include_per_vendor(vendor: str, cuda: str) -> None:
    lm = plan_for(vendor).get("infinilm")
    assert lm.defines["INFINILM_WITH_CUDA"] == cuda
    assert lm.cmake_source == COMPONENTS / "infinilm"
    assert lm.defines["INFINILM_SOURCE_DIR"] == str(lm.source_dir)


@pytest.mark.parametrize(
    ("vendor", "graph"), [("cpu", "OFF"), ("nvidia", "ON"), ("moore", "OFF"), ("thead", "ON")]
)
def test_infinilm_uses_infinirt_graphs_only_where_the_pinned_infinirt_has_them(
    vendor: str,
    graph: str,
) -> None:
    assert defines(plan_for(vendor), "infinilm-runtime")["INFINILM_INFINIRT_GRAPH"] == graph


def test_infinilm_project_files_are_part_of_its_key(tmp_path: Path) -> None:
    before = plan_for("cpu")
    assert before.get("infinilm").key_inputs["recipe"]  # recipe file + components/infinilm/ tree
    project = copy_of_the_repository(tmp_path) / "components" / "infinilm" / "CMakeLists.txt"
    project.write_text(project.read_text() + "# edited\n")
    after = planned("cpu", root=tmp_path)
    assert after.get("infinilm").key != before.get("infinilm").key
    assert after.get("infinirt").key == before.get("infinirt").key


def test_selecting_infinilm_plans_the_whole_stack_in_dependency_order() -> None:
    names = [c.name for c in plan_for("nvidia", select=("infinilm",)).components]
    assert names.index("infinirt") < names.index("infiniops") < names.index("infinilm")
    assert names.index("cutlass") < names.index("infiniops")
    assert set(names) == set(REAL_ORDER)


@pytest.mark.parametrize(
    ("gpus", "result", "code", "said"),
    [
        (1, "Correct: YES", 0, "all_reduce: not run (1 GPU)"),
        (0, "Correct: YES", 0, "all_reduce: not run (0 GPU)"),
        (2, "Rank 0 Correct: YES\nRank 1 Correct: YES", 0, "Rank 1 Correct: YES"),
        (2, "Rank 0 Correct: YES\nRank 1 Correct: NO", 1, "Rank 1 Correct: NO"),
    ],
)
def test_infiniccl_nvidia_test_runs_the_two_gpu_all_reduce_only_with_two_gpus_standin(
    tmp_path: Path, gpus: int, result: str, code: int, said: str
) -> None:
    """The test step as planned, run by sh against a stand-in nvidia-smi (listing ``gpus``) and
    a stand-in examples/ccl/all_reduce (printing ``result``)."""
    import os
    import subprocess

    test = plan_for("nvidia", tests=True).get("infiniccl").test
    assert test is not None and test.options["BUILD_EXAMPLES"] == "ON"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})\\n" for i in range(gpus))
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    example = tmp_path / "examples" / "ccl" / "all_reduce"
    example.parent.mkdir(parents=True)
    example.write_text(f'#!/bin/sh\n[ "$1 $2" = "-g 2" ] || exit 9\nprintf "{result}\\n"\n')
    for script in (smi, example):
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        list(test.command), cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout
