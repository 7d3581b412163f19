"""The mini stack's nvidia wheel built by nvcc for the vendor's architecture set, its fat binary
read back by the project's own reader (no GPU needed to compile)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from tests.conftest import HAVE_NVCC
from wheels.audit import audit_wheel
from wheels.audit_report import render_text
from wheels.cuda import devicecode
from wheels.cuda.fatbin import DeviceCode
from wheels.elf.reader import FileBytes
from wheels.policy import load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.nvcc,
    pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host"),
]


def manifest_without_architectures(mini: Path, extra: str = "") -> Path:
    """The mini stack with no cuda_architectures for nvidia (its vendor's own set applies)."""
    text = mini.read_text()
    line = '    cuda_architectures: ["75"]\n'
    assert line in text
    mini.write_text(text.replace(line, extra))
    return mini


def minirt_device_code(out: Path) -> DeviceCode:
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith("/libminirt.so")]
        library = Path(zf.extract(name, out / "unpacked"))
    fd = os.open(library, os.O_RDONLY)
    try:
        code = devicecode.read(FileBytes(fd))
    finally:
        os.close(fd)
    assert code is not None, "libminirt.so carries no fat binary: nvcc was not used"
    return code.loaded()


def test_nvidia_wheel_carries_sass_for_80_86_89_90_and_ptx_for_90_only(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    manifest = manifest_without_architectures(mini)
    result = cli("wheel", "--manifest", manifest, "--vendor", "nvidia", "--out", tmp_path / "d")
    assert result.code == 0, result.err
    code = minirt_device_code(tmp_path / "d")
    assert code.sass_archs == ("sm_80", "sm_86", "sm_89", "sm_90")
    assert code.ptx_archs == ("compute_90",)  # nothing of nvcc's default (sm_75)
    assert not any(e.compressed for e in code.entries if e.kind == "sass")
    (wheel,) = (tmp_path / "d").glob("*.whl")
    audit = audit_wheel(wheel, load_vendor_policy("nvidia"), workers=1)
    assert audit.size is not None
    (device,) = [d for d in audit.size.device if d.member.endswith("/libminirt.so")]
    targets = [t for t, _, _ in device.targets]
    assert targets == ["sm_80", "sm_86", "sm_89", "sm_90", "compute_90"]
    assert all(stored > 0 and unpacked >= stored for _, stored, unpacked in device.targets)
    assert "device code of " in render_text([audit]) and "sm_89 " in render_text([audit])


def test_fatbin_compression_all_compresses_the_sass_as_well(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    manifest = manifest_without_architectures(mini, '    cuda_architectures: ["80-real", "90"]\n')
    text = manifest.read_text().replace(
        "    check: components/checks/engine.py\n    cuda_arch",
        "    check: components/checks/engine.py\n    fatbin_compression: all\n    cuda_arch",
    )
    manifest.write_text(text)
    assert "fatbin_compression: all" in text
    result = cli("wheel", "--manifest", manifest, "--vendor", "nvidia", "--out", tmp_path / "d")
    assert result.code == 0, result.err
    code = minirt_device_code(tmp_path / "d")
    assert code.sass_archs == ("sm_80", "sm_90") and code.ptx_archs == ("compute_90",)
    assert all(e.compressed for e in code.entries), [e.target for e in code.entries]
