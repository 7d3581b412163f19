"""The CUDA architecture set and fat binary compression: what the vendors give every component,
and what stack.yaml may say (no compiler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import ManifestError
from builder.manifest.loader import load_stack
from builder.vendors import get as get_vendor
from builder.vendors.base import VendorSettings
from builder.vendors.nvidia import DEFAULT_ARCHITECTURES
from tests.planning import CUDA, defines, host, plan_for

MINI = Path(__file__).resolve().parents[2] / "examples" / "mini-stack" / "stack.yaml"


def mini_stack(tmp_path: Path, text: str) -> Path:
    """The mini stack's manifest as ``text``, beside (links to) its recipes and sources."""
    for entry in MINI.parent.iterdir():
        if entry.name != "stack.yaml":
            (tmp_path / entry.name).symlink_to(entry)
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return path


def test_every_nvidia_component_with_cuda_gets_the_whole_set_of_stack_yaml() -> None:
    plan = plan_for("nvidia", CUDA)
    declared = load_stack(Path("stack.yaml")).vendors["nvidia"].settings.cuda_architectures
    assert {"80-real", "86-real", "89-real"} <= set(declared) and "90" in declared
    for component in plan.components:  # InfiniRT and InfiniCCL too, not only InfiniOps
        assert defines(plan, component.name)["CMAKE_CUDA_ARCHITECTURES"] == ";".join(declared)


def test_nvidia_without_a_declared_set_uses_its_own_never_nvccs_default() -> None:
    nvidia = get_vendor("nvidia")
    settings = VendorSettings()
    assert nvidia.architectures(settings) == DEFAULT_ARCHITECTURES
    cmake = nvidia.cmake_defines(host(CUDA), settings)
    assert cmake["CMAKE_CUDA_ARCHITECTURES"] == "80-real;86-real;89-real;90"
    assert get_vendor("cpu").architectures(settings) == ()
    assert get_vendor("thead").architectures(settings) == ("80",)


@pytest.mark.parametrize(
    ("setting", "flags"),
    [
        (None, ()),
        ("default", ()),
        ("none", ("--compress-mode=none",)),
        ("all", ("-Xfatbin=-compress-all",)),
        ("size", ("--compress-mode=size", "-Xfatbin=-compress-all")),
    ],
)
def test_fatbin_compression_becomes_nvcc_flags(setting: str | None, flags: tuple[str, ...]) -> None:
    settings = VendorSettings(fatbin_compression=setting)
    cuda_flags = get_vendor("nvidia").cmake_defines(host(CUDA), settings)["CMAKE_CUDA_FLAGS_INIT"]
    words = cuda_flags.split()
    assert words[0] == "--objdir-as-tempdir"
    assert tuple(w for w in words if "compress" in w) == flags


def test_fatbin_compression_changes_the_build_key() -> None:
    plain = get_vendor("nvidia").cmake_defines(host(CUDA), VendorSettings())
    packed = get_vendor("nvidia").cmake_defines(
        host(CUDA), VendorSettings(fatbin_compression="all")
    )
    assert plain["CMAKE_CUDA_FLAGS_INIT"] != packed["CMAKE_CUDA_FLAGS_INIT"]


def test_unknown_fatbin_compression_is_a_located_manifest_error(tmp_path: Path) -> None:
    text = MINI.read_text().replace(
        'cuda_architectures: ["75"]', 'cuda_architectures: ["75"]\n    fatbin_compression: zip'
    )
    with pytest.raises(
        ManifestError, match=r"stack.yaml:\d+:\d+: fatbin_compression 'zip' is not one of"
    ):
        load_stack(mini_stack(tmp_path, text))


@pytest.mark.parametrize(("text", "size"), [("100MB", 100_000_000), ("95 MiB", 95 * 2**20)])
def test_wheel_max_size_is_read_in_bytes(tmp_path: Path, text: str, size: int) -> None:
    spec = load_stack(mini_stack(tmp_path, MINI.read_text() + f"  max_size: {text}\n")).wheel
    assert spec is not None and spec.max_size == size


def test_wheel_max_size_that_is_not_a_size_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="not a size: 'huge'"):
        load_stack(mini_stack(tmp_path, MINI.read_text() + "  max_size: huge\n"))
