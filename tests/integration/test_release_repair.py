"""`wheel --repair`: auditwheel retags the wheel manylinux, never grafting the libraries the
vendor's policy expects from the machine or from other distributions; the result is packed by
us again (reproducible, with its SBOM) and audited again."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from builder.pipeline.release import sbom_of
from tests.conftest import HAVE_NVCC
from tests.wheelmaker import EXT, Compiler, make_wheel
from wheels.policy import load_vendor_policy
from wheels.repair import grafted, never_graft, repair

pytestmark = pytest.mark.integration


def vendor_wheel(tmp_path: Path) -> Path:
    """A wheel whose extension needs libvendorrt.so.1, found through an absolute RUNPATH: the
    kind of library auditwheel grafts unless told not to."""
    cc = Compiler(tmp_path / "build")
    rt = cc.shared(
        "libvendorrt.so.1", "int vendor_init(void) { return 0; }\n", soname="libvendorrt.so.1"
    )
    ext = cc.shared(
        f"_dev{EXT}",
        "extern int vendor_init(void);\n"
        "void *PyInit__dev(void) { return (void *)(long)vendor_init(); }\n",
        links=[rt],
        runpath=str(rt.parent),
    )
    return make_wheel(tmp_path, {f"probe/_dev{EXT}": ext}, name="probe_pkg", version="0.1+cu130")


def members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_repair_without_exclusions_would_graft_the_vendor_library(tmp_path: Path) -> None:
    repaired = repair(vendor_wheel(tmp_path), tmp_path / "out", [], epoch=315532800)
    assert "manylinux" in repaired.name
    assert any("libvendorrt" in n for n in grafted(members(repaired)))


def test_repair_keeps_excluded_libraries_out_of_the_wheel(tmp_path: Path) -> None:
    repaired = repair(
        vendor_wheel(tmp_path), tmp_path / "out", ["libvendorrt.so.*"], epoch=315532800
    )
    assert "manylinux" in repaired.name
    assert not any("libvendorrt" in n for n in members(repaired))


def test_never_graft_list_is_the_vendor_policy_external_and_distribution_libraries() -> None:
    policy = load_vendor_policy("nvidia")
    exclude = never_graft(policy.external, policy.distributions)
    assert "libcuda.so.1" in exclude
    assert "libcudart.so.13" in exclude
    assert set(exclude) == set(policy.external) | set(policy.distributions)
    assert "libmusa.so*" in never_graft(load_vendor_policy("moore").external, {})


def test_wheel_repair_gives_an_audited_reproducible_manylinux_wheel_with_its_sbom(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    digests = []
    for out in (tmp_path / "a", tmp_path / "b"):
        result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out, "--repair")
        assert result.code == 0, result.err
        (wheel,) = out.glob("*.whl")
        digests.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert "-manylinux_" in wheel.name and "-linux_" not in wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        tags = [
            line
            for line in zf.read(next(n for n in names if n.endswith("/WHEEL")))
            .decode()
            .splitlines()
            if line.startswith("Tag: ")
        ]
    assert tags and all("manylinux_" in t for t in tags)
    assert not grafted(names)  # everything the mini stack needs is bundled or whitelisted
    document = json.loads(sbom_of(wheel))
    wheel_tag = {p["name"]: p["value"] for p in document["metadata"]["component"]["properties"]}
    assert "manylinux_" in wheel_tag["infini-stack:wheel-tag"]


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host")
def test_nvidia_wheel_repair_does_not_graft_the_cuda_runtime(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("wheel", "--manifest", mini, "--vendor", "nvidia", "--out", tmp_path, "--repair")
    assert result.code == 0, result.err
    (wheel,) = tmp_path.glob("*.whl")
    assert "+cu" in wheel.name and "manylinux_" in wheel.name
    names = members(wheel)
    assert not any("libcudart" in n or "libcuda." in n for n in names)
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "Requires-Dist: nvidia-cuda-runtime" in metadata
