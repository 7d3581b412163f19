"""Providers against stand-in trees (MUSA, the PPU SDK, NVIDIA wheels, a linked distribution)
built in tmp dirs with the real layout: compiler scripts printing the real tool's version
format, gcc-compiled ELF libraries with real SONAMEs, headers with version macros."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from builder.preflight import run_providers
from builder.providers import cuda, musa, ppu, search
from builder.providers.linked import LinkedSpec, provider
from builder.providers.probe import Provider, ProviderResult
from builder.vendors.moore import PLACES as MOORE_PLACES
from tests import standins

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not standins.HAVE_GCC, reason="needs gcc/g++ to build stand-in libraries"),
]

MOORE = {
    "infinirt": {"WITH_MOORE": "ON"},
    "infiniops": {"WITH_MOORE": "ON"},
    "infiniccl": {"WITH_MOORE": "ON", "WITH_MCCL": "ON"},
}
THEAD = {"infinirt": {"WITH_THEAD": "ON"}, "infiniops": {"WITH_NVIDIA": "ON"}}
NVIDIA = {
    "infinirt": {"WITH_NVIDIA": "ON"},
    "infiniops": {"WITH_NVIDIA": "ON"},
    "infiniccl": {"WITH_NVIDIA": "ON", "WITH_NCCL": "ON"},
}


def probe(providers: tuple[Provider, ...], **kwargs: object) -> dict[str, ProviderResult]:
    ctx = standins.context(**kwargs)  # type: ignore[arg-type]
    return {r.name: r for r in run_providers(providers, ctx)}


@pytest.fixture(scope="module")
def musa_roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("musa")
    return {
        "4.3": standins.musa_tree(base / "musa-4.3", "4.3.0"),
        "3.2": standins.musa_tree(base / "musa-3.2", "3.2.0", mccl=None),
    }


# -- MUSA ------------------------------------------------------------------------------------------


def test_standin_musa_root_env_beats_musa_home_and_libraries_come_from_it(
    musa_roots: dict[str, Path],
) -> None:
    env = {
        "PATH": "/usr/bin",
        "MUSA_ROOT": str(musa_roots["4.3"]),
        "MUSA_HOME": str(musa_roots["3.2"]),
    }
    results = probe(musa.MOORE_PROVIDERS, env=env, options=MOORE, constraints={"musa": ">=4.0"})
    toolkit = results["musa"]
    assert toolkit.status == "found" and toolkit.version == "4.3.0"
    assert toolkit.origin == "MUSA_ROOT" and toolkit.version_source == "mcc --version"
    assert toolkit.defines["MUSA_ROOT"] == str(musa_roots["4.3"])
    musart = results["musart"]
    assert musart.status == "found" and musart.version == "4.3.0"
    assert musart.path == str(musa_roots["4.3"] / "lib" / "libmusart.so")
    assert results["mccl"].version == "2.18.3"
    assert results["mccl"].version_source == "mccl.h MCCL_MAJOR/MCCL_MINOR/MCCL_PATCH"


def test_standin_musa_best_match_skips_an_older_toolkit_named_first(
    musa_roots: dict[str, Path],
) -> None:
    env = {
        "PATH": "/usr/bin",
        "MUSA_ROOT": str(musa_roots["3.2"]),
        "MUSA_HOME": str(musa_roots["4.3"]),
    }
    result = probe((musa.MUSA,), env=env, options=MOORE, constraints={"musa": ">=4.0"})["musa"]
    assert result.status == "found" and result.origin == "MUSA_HOME"
    assert any("3.2.0 does not satisfy '>=4.0'" in d for d in result.details)


def test_standin_musa_wrong_version_fails_with_the_install_hint(
    musa_roots: dict[str, Path],
) -> None:
    env = {"PATH": "/usr/bin", "MUSA_PATH": str(musa_roots["3.2"])}
    result = probe((musa.MUSA,), env=env, options=MOORE, constraints={"musa": ">=4.0"})["musa"]
    assert result.status == "wrong version" and result.failed and result.version == "3.2.0"
    assert result.hint is not None and "MUSA_ROOT" in result.hint


def test_standin_musa_default_path_is_used_when_no_env_var_is_set(
    musa_roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    places = replace(MOORE_PLACES, defaults=(str(musa_roots["4.3"]),))
    result = probe((musa.MUSA,), env={"PATH": "/usr/bin"}, options=MOORE, places=places)["musa"]
    assert result.status == "found" and result.origin == "default path"


def test_standin_musa_env_var_pointing_at_nothing_is_skipped_and_said(
    musa_roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    places = replace(MOORE_PLACES, defaults=(str(musa_roots["4.3"]),))
    env = {"PATH": "/usr/bin", "MUSA_ROOT": str(tmp_path / "nothing")}
    result = probe((musa.MUSA,), env=env, options=MOORE, places=places)["musa"]
    assert result.status == "found" and result.origin == "default path"
    assert f"skipped {tmp_path / 'nothing'} [MUSA_ROOT]: does not exist" in result.details


def test_standin_musa_unparseable_compiler_version_is_unknown_version_not_a_crash(
    tmp_path: Path,
) -> None:
    root = tmp_path / "musa"
    standins.script(root / "bin" / "mcc", 'echo "clang version 14.0.0"\n')
    result = probe(
        (musa.MUSA,),
        env={"PATH": "/usr/bin", "MUSA_ROOT": str(root)},
        options=MOORE,
        constraints={"musa": ">=4.0"},
    )["musa"]
    assert result.status == "unknown version" and result.failed
    assert any("cannot tell its version" in d for d in result.details)


def test_standin_mudnn_absent_is_a_note_because_the_pinned_infiniops_does_not_link_it(
    musa_roots: dict[str, Path],
) -> None:
    results = probe(
        musa.MOORE_PROVIDERS,
        env={"PATH": "/usr/bin", "MUSA_ROOT": str(musa_roots["4.3"])},
        options=MOORE,
    )
    assert results["mudnn"].status == "note" and not results["mudnn"].failed


# -- PPU SDK ---------------------------------------------------------------------------------------


def test_standin_ppu_thead_cuda_root_beats_ppu_sdk_root_and_version_comes_from_ppu_llc(
    tmp_path: Path,
) -> None:
    first = standins.ppu_sdk_tree(tmp_path / "sdk-a", "2.1.0")
    second = standins.ppu_sdk_tree(tmp_path / "sdk-b", "1.5.0")
    env = {"PATH": "/usr/bin", "THEAD_CUDA_ROOT": str(first), "PPU_SDK_ROOT": str(second.parent)}
    results = probe(
        ppu.THEAD_PROVIDERS,
        env=env,
        options=THEAD,
        constraints={"ppu-sdk": ">=1.0"},
        cuda_architectures=("80",),
    )
    sdk = results["ppu-sdk"]
    assert sdk.status == "found" and sdk.version == "2.1.0" and sdk.origin == "THEAD_CUDA_ROOT"
    assert sdk.version_source == "ppu-llc --version"
    assert "its nvcc is CUDA-compatible release 12.3" in sdk.details
    assert sdk.defines["CMAKE_CUDA_COMPILER"] == str(first / "bin" / "nvcc")
    assert results["cuda-arch"].status == "found"


def test_standin_ppu_sdk_root_derived_path_and_wrong_version(tmp_path: Path) -> None:
    cuda_sdk = standins.ppu_sdk_tree(tmp_path / "sdk", "0.9.0")
    env = {"PATH": "/usr/bin", "PPU_SDK_ROOT": str(cuda_sdk.parent)}
    sdk = probe((ppu.PPU_SDK,), env=env, options=THEAD, constraints={"ppu-sdk": ">=1.0"})["ppu-sdk"]
    assert sdk.status == "wrong version" and sdk.origin == "$PPU_SDK_ROOT/CUDA_SDK"


def test_standin_ppu_sdk_without_ppu_llc_is_unknown_version_when_constrained(
    tmp_path: Path,
) -> None:
    cuda_sdk = standins.ppu_sdk_tree(tmp_path / "sdk", version=None)
    env = {"PATH": "/usr/bin", "PPU_CUDA_ROOT": str(cuda_sdk)}
    sdk = probe((ppu.PPU_SDK,), env=env, options=THEAD, constraints={"ppu-sdk": ">=1.0"})["ppu-sdk"]
    assert sdk.status == "unknown version" and sdk.failed
    assert any("no " + str(cuda_sdk.parent / "bin" / "ppu-llc") in d for d in sdk.details)


def test_standin_ppu_arch_not_listed_by_its_nvcc_is_wrong_version(tmp_path: Path) -> None:
    cuda_sdk = standins.ppu_sdk_tree(tmp_path / "sdk")
    results = probe(
        ppu.THEAD_PROVIDERS,
        env={"PATH": "/usr/bin", "PPU_CUDA_ROOT": str(cuda_sdk)},
        options=THEAD,
        cuda_architectures=("90",),
    )
    arch = results["cuda-arch"]
    assert arch.status == "wrong version" and "cannot compile for 90" in " ".join(arch.details)


# -- NVIDIA wheels ---------------------------------------------------------------------------------


def test_standin_nccl_wheel_layout_is_found_and_its_missing_link_name_is_fixed_by_a_define(
    tmp_path: Path,
) -> None:
    prefix = standins.nccl_wheel(tmp_path / "site", "2.21.5")
    result = probe(
        (cuda.NCCL,), site=(tmp_path / "site",), options=NVIDIA, constraints={"nccl": ">=2.18"}
    )["nccl"]
    assert result.status == "found" and result.version == "2.21.5"
    assert result.version_source == "nccl.h NCCL_MAJOR/NCCL_MINOR/NCCL_PATCH"
    assert result.origin == "site-packages (nvidia_nccl_cu13)"
    assert result.path == str(prefix / "lib" / "libnccl.so.2")
    assert any("no unversioned link name libnccl.so" in d for d in result.details)
    assert result.defines["NCCL_LIB"] == str(prefix / "lib" / "libnccl.so.2")
    assert result.defines["NCCL_INC"] == str(prefix / "include")


def test_standin_nccl_wheel_too_old_is_wrong_version(tmp_path: Path) -> None:
    standins.nccl_wheel(tmp_path / "site", "2.16.2")
    result = probe(
        (cuda.NCCL,), site=(tmp_path / "site",), options=NVIDIA, constraints={"nccl": ">=2.18"}
    )["nccl"]
    assert result.status == "wrong version" and result.version == "2.16.2"


def test_standin_nccl_root_env_beats_the_wheel(tmp_path: Path) -> None:
    standins.nccl_wheel(tmp_path / "site", "2.21.5")
    root = tmp_path / "nccl"
    standins.header(
        root / "include" / "nccl.h", {"NCCL_MAJOR": 2, "NCCL_MINOR": 23, "NCCL_PATCH": 4}
    )
    standins.shared_library(root / "lib", "nccl", "2.23.4")
    result = probe(
        (cuda.NCCL,),
        env={"PATH": "/usr/bin", "NCCL_ROOT": str(root)},
        site=(tmp_path / "site",),
        options=NVIDIA,
    )["nccl"]
    assert result.origin == "NCCL_ROOT" and result.version == "2.23.4"
    assert result.path == str(root / "lib" / "libnccl.so")
    # It is what the user asked for, but not what runs: preflight says so.
    assert any(
        "not what runs" in d and str(tmp_path / "site" / "nvidia" / "nccl") in d
        for d in result.details
    )


def test_standin_nccl_wheel_beats_the_toolkits_nccl_because_it_is_what_runs(
    tmp_path: Path,
) -> None:
    """torch, which the stack's wheel requires and imports first, loads the nvidia-nccl wheel's
    libnccl.so.2: preflight approves that copy, not the one beside the toolkit."""
    wheel = standins.nccl_wheel(tmp_path / "site", "2.27.7")
    root = tmp_path / "cuda"
    standins.nvcc_script(root, "13.0")
    standins.header(
        root / "include" / "nccl.h", {"NCCL_MAJOR": 2, "NCCL_MINOR": 28, "NCCL_PATCH": 3}
    )
    standins.shared_library(root / "lib64", "nccl", "2.28.3")
    env = {"PATH": "/usr/bin:/bin", "CUDA_HOME": str(root)}
    found = probe((cuda.CUDA, cuda.NCCL), env=env, site=(tmp_path / "site",), options=NVIDIA)
    result = found["nccl"]
    assert result.version == "2.27.7" and result.path == str(wheel / "lib" / "libnccl.so.2")
    assert result.origin == "site-packages (nvidia_nccl_cu13)"
    assert result.defines["NCCL_LIB"] == str(wheel / "lib" / "libnccl.so.2")
    without_wheel = probe((cuda.CUDA, cuda.NCCL), env=env, options=NVIDIA)["nccl"]
    assert without_wheel.version == "2.28.3" and without_wheel.origin == "cuda toolkit"
    assert not any("not what runs" in d for d in without_wheel.details)


def test_standin_nccl_header_without_version_macros_is_unknown_version_when_constrained(
    tmp_path: Path,
) -> None:
    root = tmp_path / "nccl"
    standins.header(root / "include" / "nccl.h", {"NCCL_SOMETHING": 1})
    standins.shared_library(root / "lib", "nccl", "2")
    result = probe(
        (cuda.NCCL,),
        env={"PATH": "/usr/bin", "NCCL_ROOT": str(root)},
        options=NVIDIA,
        constraints={"nccl": ">=2.18"},
    )["nccl"]
    assert result.status == "unknown version" and result.failed


def test_standin_cublas_wheel_is_found_with_header_version_and_explicit_library_defines(
    tmp_path: Path,
) -> None:
    prefix = standins.cublas_wheel(tmp_path / "site", "13.1.0.3")
    results = probe((cuda.CUBLAS, cuda.CUBLASLT), site=(tmp_path / "site",), options=NVIDIA)
    cublas = results["cublas"]
    assert cublas.status == "found" and cublas.version == "13.1.0"
    assert cublas.defines["CUDA_cublas_LIBRARY"] == str(prefix / "lib" / "libcublas.so.13")
    assert cublas.defines["CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES"] == str(prefix / "include")
    assert results["cublaslt"].defines["CUDA_cublasLt_LIBRARY"] == str(
        prefix / "lib" / "libcublasLt.so.13"
    )


def test_standin_cuda_toolkit_without_driver_stubs_fails_the_driver_link_check_until_it_has_them(
    tmp_path: Path,
) -> None:
    """InfiniOps and InfiniCCL link CUDA::cuda_driver: without a libcuda.so their configure fails,
    so preflight must say so first; the toolkit's lib64/stubs/libcuda.so (a gcc-built stub)
    satisfies it. InfiniRT does not link it."""
    root = tmp_path / "cuda"
    standins.nvcc_script(root, "13.0")
    env = {"PATH": "/usr/bin:/bin", "CUDA_HOME": str(root), "LD_LIBRARY_PATH": str(tmp_path)}
    providers = (cuda.CUDA, cuda.CUDA_DRIVER_LINK)
    if any((d / "libcuda.so").exists() for d in search.system_lib_dirs(standins.context())):
        pytest.skip("this host has a libcuda.so of its own")
    missing = probe(providers, env=env, options=NVIDIA)["cuda-driver-link"]
    assert missing.status == "missing" and "cuda-driver-dev" in (missing.hint or "")
    stub = standins.shared_library(root / "lib64" / "stubs", "cuda", "", soname_major="1")
    assert stub.name == "libcuda.so"
    found = probe(providers, env=env, options=NVIDIA)["cuda-driver-link"]
    assert found.status == "found" and found.path == str(stub)
    assert found.origin == "cuda toolkit stubs"
    without_ccl = probe(providers, env=env, options={"infinirt": {"WITH_NVIDIA": "ON"}})
    assert without_ccl["cuda-driver-link"].status == "not checked"


# -- linked providers ------------------------------------------------------------------------------

LINKED_SOURCE = """
#include <optional>
namespace at { struct Tensor {}; }
namespace flash {
void mha_fwd(at::Tensor&, const at::Tensor&, std::optional<const at::Tensor>&, int) {}
%s
}
"""
HAVE = "flash::mha_fwd(at::Tensor&, at::Tensor const&, std::optional<at::Tensor const>&, int)"
OTHER = "flash::mha_bwd(at::Tensor&, float)"


def linked_dist(site: Path, version: str, extra: str = "") -> Path:
    package = site / "flash_attn"
    package.mkdir(parents=True, exist_ok=True)
    library = package / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    standins.compile_library(library, LINKED_SOURCE % extra, cxx=True)
    standins.dist_info(site, "flash-attn", version, [str(library.relative_to(site))])
    return library


def linked_spec(
    symbols: tuple[str, ...], glob: str = "flash_attn/flash_attn_2_cuda*.so", version: str = ">=2.6"
) -> LinkedSpec:
    return LinkedSpec(
        name="flash_attn",
        distribution="flash-attn",
        version=version,
        library_glob=glob,
        required_symbols=symbols,
    )


def linked_probe(site: Path, spec: LinkedSpec) -> ProviderResult:
    (result,) = run_providers(
        (provider(spec),),
        standins.context(
            site=(site,),
            options={"infiniops": {"WITH_LINKED": "ON"}},
            constraints={spec.provider_name: spec.version},
        ),
    )
    return result


def test_standin_linked_distribution_exporting_the_required_cxx_symbol_is_found(
    tmp_path: Path,
) -> None:
    library = linked_dist(tmp_path, "2.7.4")
    result = linked_probe(tmp_path, linked_spec((HAVE,)))
    assert result.status == "found" and result.version == "2.7.4"
    assert result.path == str(library)


def test_standin_linked_library_lacking_a_required_symbol_fails_naming_it(tmp_path: Path) -> None:
    linked_dist(tmp_path, "2.7.4")
    result = linked_probe(tmp_path, linked_spec((HAVE, OTHER)))
    assert result.status == "wrong version" and result.failed
    assert any("lacks required symbol(s): " + OTHER in d for d in result.details)


def test_standin_linked_symbol_present_once_defined(tmp_path: Path) -> None:
    linked_dist(tmp_path, "2.7.4", extra="void mha_bwd(at::Tensor&, float) {}")
    assert linked_probe(tmp_path, linked_spec((HAVE, OTHER))).status == "found"


def test_standin_linked_symbols_unchecked_without_a_demangler_is_a_note_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.providers import demangle

    linked_dist(tmp_path, "2.7.4")
    reason = "libstdc++.so.6 cannot be loaded (absent), so C++ symbols cannot be demangled"
    monkeypatch.setattr(demangle, "_load", lambda: reason)
    result = linked_probe(tmp_path, linked_spec((HAVE, OTHER)))
    assert result.status == "found" and not result.failed
    assert f"required symbol(s) not checked: {reason}" in result.details


def test_standin_linked_version_outside_the_specifier_is_wrong_version(tmp_path: Path) -> None:
    linked_dist(tmp_path, "2.5.0")
    result = linked_probe(tmp_path, linked_spec((HAVE,)))
    assert result.status == "wrong version" and result.version == "2.5.0"


def test_standin_linked_glob_matching_nothing_is_missing_with_the_reason(tmp_path: Path) -> None:
    linked_dist(tmp_path, "2.7.4")
    result = linked_probe(tmp_path, linked_spec((HAVE,), glob="flash_attn/nope*.so"))
    assert result.status == "missing"
    assert any("matched 0 files" in d for d in result.details)


def test_a_recipe_says_when_its_build_needs_no_vendor_toolkit(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The mini stack's moore backends are stand-ins (vendors.moore.toolkit: false); a recipe
    without that line needs the MUSA toolkit, which this host lacks."""
    import shutil

    from tests.conftest import MINI

    root = tmp_path / "mini"
    shutil.copytree(MINI, root)
    assert cli("preflight", "--manifest", root / "stack.yaml", "--vendor", "moore").code == 0
    recipe = root / "components" / "minirt.yaml"
    text = recipe.read_text()
    assert ", toolkit: false}" in text
    recipe.write_text(text.replace(", toolkit: false}", "}", 1))
    result = cli("preflight", "--manifest", root / "stack.yaml", "--vendor", "moore")
    assert result.code == 3
    assert "musa: missing" in result.err
