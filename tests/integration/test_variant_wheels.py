"""PEP 825 variant wheels for real: nvcc-built libraries give sm_arch, the mini stack's nvidia
wheel --variant is valid by variantlib, the audit catches a declared architecture with no code
for it, and the variant wheel is reproducible and part of a release."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from tests.conftest import HAVE_NVCC
from tests.wheelmaker import LINUX, make_wheel
from wheels import variants
from wheels.audit import audit_wheel
from wheels.naming import variant_label
from wheels.policy import load_vendor_policy

pytestmark = pytest.mark.integration
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
KERNEL = "__global__ void k(float *a) { a[threadIdx.x] += 1.0f; }\n"


def nvcc_library(out: Path, name: str, *gencode: str) -> Path:
    src = out / f"{name}.cu"
    src.write_text(KERNEL)
    target = out / f"lib{name}.so"
    flags = [f for g in gencode for f in ("-gencode", g)]
    argv = [NVCC, "-shared", "-cudart", "shared", "-Xcompiler", "-fPIC", *flags]
    subprocess.run([*argv, "-o", str(target), str(src)], check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not HAVE_NVCC:
        pytest.skip("nvcc is not installed on this host")
    out = tmp_path_factory.mktemp("variant-libs")
    return {
        "sm75": nvcc_library(out, "sm75", "arch=compute_75,code=sm_75"),
        "sm80-ptx80": nvcc_library(out, "sm80", "arch=compute_80,code=[sm_80,compute_80]"),
    }


def variant_wheel(out: Path, files: dict[str, Path], declared: list[str]) -> Path:
    """A variant wheel ``cu130`` whose variant.json declares ``declared`` sm_arch values."""
    namespaces, providers = variants.stack_metadata(("nvidia",))
    props = {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": declared}}
    doc = variants.dumps(variants.document("cu130", props, namespaces, providers))
    wheel = make_wheel(
        out,
        {**files, "demo-1.0.dist-info/variant.json": doc},
        version="1.0",
        requires=["nvidia-cuda-runtime"],
        tag=LINUX,
    )
    return wheel.rename(wheel.with_name(wheel.name.removesuffix(".whl") + "-cu130.whl"))


@pytest.mark.nvcc
def test_sm_arch_is_the_sass_and_ptx_nvcc_put_in_the_libraries(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    for lib in libs.values():
        shutil.copy(lib, tmp_path)
    props = variants.properties_of(
        load_vendor_policy("nvidia").variant,
        toolkit_version="13.0",
        architectures=("90",),  # a wish: stack.yaml is not what is read
        device_code=variants.staged_device_code(tmp_path),
    )
    assert props["nvidia"]["sm_arch"] == ["75_real", "80_real", "80_virtual"]


@pytest.mark.nvcc
def test_declaring_an_architecture_without_sass_or_ptx_for_it_is_a_violation(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    files = {"demo/lib/libsm75.so": libs["sm75"]}
    good = audit_wheel(variant_wheel(tmp_path / "good", files, ["75_real"]), policy())
    assert not [f for f in good.findings if f.code.startswith("variant")], good.findings
    bad = audit_wheel(variant_wheel(tmp_path / "bad", files, ["75_real", "90_real"]), policy())
    messages = [f.message for f in bad.violations if f.code == "variant-arch"]
    assert messages == ["declares nvidia :: sm_arch :: 90_real, but no SASS for sm_90 is there"]


@pytest.mark.nvcc
def test_an_elf_without_code_for_a_declared_architecture_is_named(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    files = {"demo/lib/libsm75.so": libs["sm75"], "demo/lib/libsm80.so": libs["sm80-ptx80"]}
    audit = audit_wheel(variant_wheel(tmp_path, files, ["75_real", "80_real"]), policy())
    located = {(f.member, f.message.split(" (")[0]) for f in audit.violations}
    assert ("demo/lib/libsm75.so", "but no SASS for sm_80 is there") in located
    assert ("demo/lib/libsm80.so", "but no SASS for sm_75 is there") in located
    assert any("80_virtual" in w.message for w in audit.warnings)  # found, not declared


def test_a_variant_name_without_variant_json_is_a_violation(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"demo/__init__.py": b""}, version="1.0")
    wheel = wheel.rename(wheel.with_name(wheel.name.removesuffix(".whl") + "-null.whl"))
    audit = audit_wheel(wheel, load_vendor_policy("cpu"))
    assert [f.code for f in audit.violations] == ["variant-metadata"]


def policy():  # type: ignore[no-untyped-def]
    return load_vendor_policy("nvidia")


def variant_json(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/variant.json")]
        return zf.read(name)


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc to build the nvidia mini stack")
def test_the_mini_stacks_nvidia_variant_wheel_is_what_variantlib_reads(
    home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "dist"
    result = cli("wheel", "--manifest", mini, "--vendor", "nvidia", "--variant", "--out", out)
    assert result.code == 0, result.err
    (plain,) = out.glob("*+cu*.whl")
    local = plain.name.split("+", 1)[1].split("-", 1)[0]  # what the naming authority chose
    label = variant_label(local, has_properties=True)
    (wheel,) = out.glob(f"*-{label}.whl")
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel.name)
    assert match is not None and match.group("variant_label") == label
    info = VariantDistInfo(variant_json(wheel), expected_label=label)
    found = {p.to_str() for p in info.variant_desc.properties}
    # examples/mini-stack builds its CUDA backend for 75: nvcc's SASS and PTX for it.
    assert "nvidia :: sm_arch :: 75_real" in found
    assert any(p.startswith("nvidia :: cuda_version_lower_bound :: 13.") for p in found)
    index = VariantsJson(json.loads((out / "infini_mini-0.1.0-variants.json").read_text()))
    assert set(index.variants) == {label}
    assert str(wheel) in result.out and str(plain) in result.out


def test_the_cpu_variant_wheel_is_reproducible_and_the_null_variant(
    shared_home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "d"
    result = cli(
        "wheel", "--manifest", mini, "--vendor", "cpu", "--variant", "--verify", "--out", out
    )
    assert result.code == 0, result.err
    (wheel,) = out.glob("*-null.whl")
    assert f"verify: {wheel.name}: two builds are byte-identical" in result.err
    assert VariantDistInfo(variant_json(wheel), expected_label="null").variant_desc.properties == []


def test_release_with_wheel_variant_true_writes_the_variant_and_its_index(
    shared_home: Path, mini: Path, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    text = mini.read_text()
    mini.write_text(text.replace("wheel:\n", "wheel:\n  variant: true\n"))
    out = tmp_path / "release"
    result = cli("release", "--manifest", mini, "--vendor", "cpu", "--no-verify", "-o", out)
    assert result.code == 0, result.err
    names = {p.name for p in out.iterdir()}
    assert "infini_mini-0.1.0-variants.json" in names
    (wheel,) = [n for n in names if n.endswith("-null.whl")]
    sums = (out / "SHA256SUMS").read_text()
    assert wheel in sums and "infini_mini-0.1.0-variants.json" in sums
    report = json.loads((out / "release-report.json").read_text())
    assert report["steps"]["variant"]["wheel"] == wheel
