"""Preflight on this host: real probes (the CUDA 13 toolkit at /usr/local/cuda, no cuBLAS, no
NCCL, no driver), reports, the build-facing API, the CLI, and bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder import preflight
from builder.core import host as host_facts
from builder.core.errors import EXIT_PREFLIGHT, ManifestError, PreflightError
from builder.core.host import HostFacts
from builder.core.layout import Layout
from builder.manifest.loader import load_stack
from builder.manifest.model import Stack
from builder.providers import cuda
from builder.providers.linked import load as load_linked
from builder.providers.probe import ProviderResult, evaluate
from builder.vendors.nvidia import PLUGIN as NVIDIA
from tests import standins

ROOT = Path(__file__).resolve().parents[2]
CUDA_ROOT = Path("/usr/local/cuda")
HAVE_CUDA = (CUDA_ROOT / "bin" / "nvcc").is_file()
Cli = Callable[..., Any]  # the conftest fixture: cli(*args) -> CliResult(code, out, err)
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs the CUDA toolkit at /usr/local/cuda")


@pytest.fixture(scope="module")
def stack() -> Stack:
    return load_stack(ROOT / "stack.yaml")


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv with nothing installed: the target Python no other test or engineer touches."""
    venv = tmp_path_factory.mktemp("venv") / "clean"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def host_for(python: str, env: dict[str, str] | None = None) -> HostFacts:
    return host_facts.detect(dict(os.environ if env is None else env), python=python)


def nvidia(stack: Stack, python: str, **kwargs: object) -> preflight.PreflightReport:
    return preflight.check(stack, "nvidia", host_for(python), **kwargs)  # type: ignore[arg-type]


# -- real probes on this host ----------------------------------------------------------------------


@needs_cuda
def test_real_cuda_13_toolkit_at_usr_local_cuda_is_found_with_nvccs_version(
    stack: Stack, clean_python: str
) -> None:
    report = nvidia(stack, clean_python)
    result = report.get("cuda")
    assert result is not None and result.status == "found"
    assert result.version == "13.0" and result.version_source == "nvcc --version"
    assert result.path == str(CUDA_ROOT / "bin" / "nvcc") and result.origin == "default path"
    if not (CUDA_ROOT / "version.json").exists():
        assert any("no version.json" in d for d in result.details)
    cudart = report.get("cudart")
    assert cudart is not None and cudart.status == "found" and cudart.version == "13.0"


@needs_cuda
def test_real_cublas_and_nccl_missing_for_a_clean_python_with_what_to_install(
    stack: Stack, clean_python: str
) -> None:
    report = nvidia(stack, clean_python)
    for name, pip in (("cublas", "nvidia-cublas"), ("nccl", "nvidia-nccl-cu13")):
        result = report.get(name)
        assert result is not None and result.status == "missing" and result.failed
        assert result.hint is not None and pip in result.hint
    assert not report.ok
    assert {"cublas", "nccl"} <= {r.name for r in report.failures}


def test_real_driver_absent_is_a_run_time_note_at_build_and_a_failure_at_run(
    stack: Stack, clean_python: str
) -> None:
    build = nvidia(stack, clean_python)
    driver = build.get("cuda-driver")
    assert driver is not None
    if driver.status == "found":
        pytest.skip("this host has an NVIDIA driver")
    assert driver.status == "note" and not driver.failed and driver.needed_for == ("run",)
    run = nvidia(stack, clean_python, purpose="run")
    run_driver = run.get("cuda-driver")
    assert run_driver is not None and run_driver.status == "missing" and run_driver.failed


def test_for_run_leaves_build_only_providers_unchecked(stack: Stack, clean_python: str) -> None:
    report = nvidia(stack, clean_python, purpose="run")
    for name in ("cmake", "ninja", "cuda", "cuda-arch"):
        result = report.get(name)
        assert result is not None and result.status == "not checked"
        assert result.details == ("needed only to build",)


@needs_cuda
def test_cuda_home_pointing_at_nothing_is_skipped_and_said_then_the_default_is_used(
    stack: Stack, clean_python: str, tmp_path: Path
) -> None:
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "nothing")}
    report = preflight.check(stack, "nvidia", host_for(clean_python, env))
    result = report.get("cuda")
    assert result is not None and result.status == "found" and result.origin == "default path"
    assert f"skipped {tmp_path / 'nothing'} [CUDA_HOME]: does not exist" in result.details


@needs_cuda
@pytest.mark.parametrize(
    ("archs", "status"),
    [
        (
            ("90", "100", "120a", "90-real"),
            "found",
        ),  # sm_100+ accepted (upstream's builder rejects)
        (("70",), "wrong version"),  # CUDA 13 dropped Volta
        (("native",), "found"),
    ],
)
def test_real_nvcc_decides_which_cuda_architectures_are_supported(
    archs: tuple[str, ...], status: str
) -> None:
    nvcc = CUDA_ROOT / "bin" / "nvcc"
    ctx = standins.context(cuda_architectures=archs, options={"infinirt": {"WITH_NVIDIA": "ON"}})
    deps = {"cuda": ProviderResult(name="cuda", status="found", path=str(nvcc))}
    result = evaluate(cuda.CUDA_ARCH, ctx, deps, purpose="build", components=("infinirt",))
    assert result.status == status


def test_unparseable_version_json_is_a_clear_note_and_nvcc_still_decides(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    standins.nvcc_script(root, "12.6")
    (root / "version.json").write_text("{not json", encoding="utf-8")
    ctx = standins.context(
        env={"PATH": "/usr/bin", "CUDA_HOME": str(root)},
        options={"infinirt": {"WITH_NVIDIA": "ON"}},
        constraints={"cuda": ">=12.4"},
    )
    result = evaluate(cuda.CUDA, ctx, {}, purpose="build", components=("infinirt",))
    assert result.status == "found" and result.version == "12.6" and result.origin == "CUDA_HOME"
    assert any(d.startswith("version.json is unreadable (JSONDecodeError") for d in result.details)


def test_cutlass_comes_from_the_fetchcontent_option_in_stack_yaml(tmp_path: Path) -> None:
    cutlass = tmp_path / "cutlass"
    standins.header(cutlass / "include" / "cutlass" / "cutlass.h", {})
    standins.header(
        cutlass / "include" / "cutlass" / "version.h",
        {"CUTLASS_MAJOR": 4, "CUTLASS_MINOR": 4, "CUTLASS_PATCH": 1},
    )
    ctx = standins.context(
        options={
            "infiniops": {"WITH_NVIDIA": "ON", "FETCHCONTENT_SOURCE_DIR_CUTLASS": str(cutlass)}
        }
    )
    result = evaluate(cuda.CUTLASS, ctx, {}, purpose="build", components=("infiniops",))
    assert result.status == "found" and result.version == "4.4.1"
    assert result.origin == "stack.yaml option"
    assert result.defines == {"FETCHCONTENT_SOURCE_DIR_CUTLASS": str(cutlass)}


# -- the report and the build-facing API -----------------------------------------------------------


def test_fingerprints_are_version_at_path_of_found_build_providers_only(
    stack: Stack, clean_python: str
) -> None:
    report = nvidia(stack, clean_python)
    prints = report.fingerprints()
    cmake = report.get("cmake")
    assert cmake is not None and prints["cmake"] == f"{cmake.version}@{cmake.path}"
    assert "cuda-driver" not in prints and "nvidia-smi" not in prints
    assert "cublas" not in prints  # missing: nothing to fingerprint
    assert "git" not in prints  # cannot change what a build produces
    infinirt = report.fingerprints("infinirt")
    assert "cmake" in infinirt and "pybind11" not in infinirt


def test_apply_to_puts_fingerprints_hints_and_toolkit_into_host_facts(
    stack: Stack, clean_python: str
) -> None:
    host = host_for(clean_python)
    report = preflight.check(stack, "nvidia", host)
    applied = report.apply_to(host)
    assert applied.providers == report.fingerprints()
    assert applied.hints == report.hints()
    if HAVE_CUDA:
        assert applied.toolkit is not None and applied.toolkit.version == "13.0"
        assert applied.hints["CUDAToolkit_ROOT"] == str(CUDA_ROOT)
    # The vendor passes the hints on to CMake (and so into every cache key).
    faked = replace(applied, hints={**applied.hints, "NCCL_LIB": "/x/libnccl.so.2"})
    defines = NVIDIA.cmake_defines(faked, stack.vendors["nvidia"].settings)
    assert defines["NCCL_LIB"] == "/x/libnccl.so.2"


def test_hints_merge_include_directories_from_several_providers() -> None:
    key = "CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES"
    results = tuple(
        ProviderResult(name=n, status="found", defines={key: d})
        for n, d in (("a", "/a/include"), ("b", "/b/include"), ("c", "/a/include"))
    )
    report = preflight.PreflightReport(
        vendor="nvidia",
        purpose="build",
        manifest="m",
        python="p",
        components=(),
        results=results,
        seconds=0.0,
    )
    assert report.hints()[key] == "/a/include;/b/include"


def test_require_raises_exit_3_naming_every_failing_provider_and_its_hint(
    stack: Stack, clean_python: str
) -> None:
    host = host_for(clean_python)
    with pytest.raises(PreflightError) as info:
        preflight.require(stack, "nvidia", host, ("infiniccl",))
    error = info.value
    assert error.exit_code == EXIT_PREFLIGHT == 3
    assert "nccl: missing, wanted >=2.18" in error.message
    assert "hint: pip install nvidia-nccl-cu13" in error.message
    assert "cutlass" not in error.message  # only InfiniOps needs CUTLASS


def test_require_for_components_that_need_nothing_missing_returns_the_report(
    stack: Stack, clean_python: str
) -> None:
    if not HAVE_CUDA:
        pytest.skip("needs the CUDA toolkit")
    report = preflight.require(stack, "nvidia", host_for(clean_python), ("infinirt",))
    assert report.ok and report.components == ("infinirt",)


def test_python_constraint_defaults_to_the_wheels_requires_python(stack: Stack) -> None:
    assert stack.wheel is not None
    wanted = preflight.constraints(stack, "cpu", NVIDIA.providers())
    assert wanted["python"] == stack.wheel.requires_python


def test_record_keeps_the_latest_report_per_vendor_and_purpose(
    stack: Stack, clean_python: str, tmp_path: Path
) -> None:
    report = nvidia(stack, clean_python)
    path = preflight.record(report, Layout(home=tmp_path, store_root=tmp_path / "store"))
    assert path == tmp_path / "preflight" / "nvidia-build.json"
    assert json.loads(path.read_text(encoding="utf-8"))["fingerprints"] == report.fingerprints()


def test_table_has_the_columns_and_sums_up_unchecked_providers(
    stack: Stack, clean_python: str
) -> None:
    text = nvidia(stack, clean_python).table()
    header = text.splitlines()[1].split()
    assert header == ["provider", "wanted", "found", "where", "status", "hint"]
    assert "not checked: mpi (needed only by infiniccl with WITH_OMPI or WITH_MPICH ON)" in text


def test_a_narrow_terminal_gets_a_line_per_provider_and_its_path_below_it(
    stack: Stack, clean_python: str
) -> None:
    report = nvidia(stack, clean_python)
    whole = report.table()
    narrow = report.table(60)
    assert max(len(line) for line in narrow.splitlines()) <= 60 < max(map(len, whole.split("\n")))
    assert report.table(None) == whole
    for result in report.results:
        if result.path and result.status != "not checked":
            shown = "".join(f"at {result.path} [{result.origin}]".split())
            assert "".join(narrow.split()).count(shown) == 1


# -- bad inputs ------------------------------------------------------------------------------------


def write_stack(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "stack.yaml").read_text(encoding="utf-8")
    assert old in text
    manifest = tmp_path / "stack.yaml"
    manifest.write_text(text.replace(old, new), encoding="utf-8")
    (tmp_path / "components").symlink_to(ROOT / "components")
    return manifest


def test_malformed_specifier_in_stack_yaml_is_a_located_manifest_error(tmp_path: Path) -> None:
    manifest = write_stack(tmp_path, 'nccl: ">=2.18"', 'nccl: ">=2.18 please"')
    with pytest.raises(ManifestError) as info:
        load_stack(manifest)
    (problem,) = info.value.problems
    line = next(i for i, t in enumerate(manifest.read_text().splitlines(), 1) if "please" in t)
    assert f"stack.yaml:{line}:" in problem and "not a PEP 440 version specifier" in problem


def test_unknown_provider_name_in_stack_yaml_suggests_the_closest(tmp_path: Path) -> None:
    # The loader knows each vendor's providers, so the mistake is located in stack.yaml.
    with pytest.raises(ManifestError) as info:
        load_stack(write_stack(tmp_path, 'nccl: ">=2.18"', 'ncl: ">=2.18"'))
    assert "unknown nvidia provider 'ncl'" in info.value.problems[0]
    assert "did you mean 'nccl'?" in info.value.problems[0]


def test_linked_file_with_bad_entries_is_a_manifest_error_listing_each(tmp_path: Path) -> None:
    path = tmp_path / "linked.yaml"
    path.write_text(
        "linked:\n  a: {distribution: x, library_glob: /abs.so, version: '>>1'}\n"
        "  b: {library_glob: b.so, colour: red}\n",
        encoding="utf-8",
    )
    with pytest.raises(ManifestError) as info:
        load_linked(path)
    text = "\n".join(info.value.problems)
    assert "linked.a.version" in text and "linked.a.library_glob" in text
    assert "linked.b.distribution" in text and "linked.b.colour: unknown key" in text


# -- the command -----------------------------------------------------------------------------------


def test_cli_preflight_nvidia_prints_the_table_and_exits_3(cli: Cli, home: Path) -> None:
    result = cli("preflight", "--vendor", "nvidia", "--manifest", ROOT / "stack.yaml")
    assert result.code == 3
    assert "provider" in result.out and "nvidia (build): FAILED" in result.out
    assert "error: preflight for nvidia (build)" in result.err
    assert (home / "preflight" / "nvidia-build.json").is_file()


def test_cli_preflight_json_is_machine_readable(cli: Cli, home: Path) -> None:
    result = cli(
        "preflight",
        "--vendor",
        "nvidia",
        "--manifest",
        ROOT / "stack.yaml",
        "--for",
        "run",
        "--json",
    )
    data = json.loads(result.out)
    assert data["purpose"] == "run" and data["ok"] is False and result.code == 3
    assert {p["name"] for p in data["providers"]} >= {"cuda", "nccl", "cuda-driver"}


def test_cli_preflight_cpu_runtime_component_of_the_mini_stack_passes(
    cli: Cli, home: Path, mini: Path
) -> None:
    result = cli("preflight", "--vendor", "cpu", "--manifest", mini, "--component", "minirt")
    assert result.code == 0, result.out + result.err
    assert "cpu (build): ok" in result.out


def test_cli_preflight_unknown_component_is_a_usage_error(cli: Cli, home: Path) -> None:
    result = cli(
        "preflight",
        "--vendor",
        "cpu",
        "--manifest",
        ROOT / "stack.yaml",
        "--component",
        "infinirtt",
    )
    assert result.code == 2 and "infinirt" in result.err


def test_a_provider_needed_only_by_an_option_says_so_in_plain_words() -> None:
    from builder.preflight import _by

    assert _by("with WITH_MOORE ON") == "with WITH_MOORE ON"
    assert _by("infiniccl with WITH_OMPI ON") == "by infiniccl with WITH_OMPI ON"
