"""The audit reads the CUDA device code of a wheel's ELF files and holds an NVIDIA wheel's to the
architectures the stack declares and to the CUDA runtime the wheel declares.

nvcc builds one tiny kernel library per ``-gencode`` mix: SASS for sm_90 (runs on the declared
90), SASS and PTX for 80 (runs on 90 once the driver JIT-compiles the PTX), SASS for sm_80 only
(no kernel image for 90). gcc builds what nvcc would not: a ``.nv_fatbin`` section of garbage,
and a library large enough that the audit keeps only part of it inflated, its fat binary
(crafted bytes) past that part. cuobjdump, where present, says what each library holds; and the
fat binary headers picked out while a library streams past are all its device code's reading
needs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from builder.core.errors import AuditError
from tests.conftest import HAVE_NVCC, MINI, CliResult
from tests.integration.test_fatbin_nvcc import (
    KERNEL,
    NVCC,
    cuobjdump,
    gencode,
    listed,
    needs_cuobjdump,
    nvcc_release,
)
from tests.unit.test_devicecode import Unreadable
from tests.unit.test_fatbin import ELF, LINUX64, PTX, PTX_TEXT, entry, fatbin
from tests.wheelmaker import Compiler, have_gcc, make_wheel
from wheels.audit import audit_wheel
from wheels.audit.members import KEEP_PREFIX
from wheels.audit_report import WheelAudit, render_text, to_json
from wheels.cuda.fatbin import read_fatbin, read_fatbin_at
from wheels.cuda.tap import FatbinTap
from wheels.elf import section_span
from wheels.policy import load_vendor_policy

pytestmark = [pytest.mark.integration]
with_gcc = pytest.mark.skipif(not have_gcc(), reason="gcc is not installed")

RUNPATH = "$ORIGIN/../../nvidia/cu13/lib"  # where nvidia-cuda-runtime puts libcudart.so.13
BUILDS = {
    "sm90": gencode("90", "sm_90"),
    "sm80-ptx80": gencode("80", "sm_80", "compute_80"),
    "sm80": gencode("80", "sm_80"),
}
LISTED = {  # what each library holds, as cuobjdump --list-elf --list-ptx names it
    "sm90": [("sass", "sm_90")],
    "sm80-ptx80": [("ptx", "sm_80"), ("sass", "sm_80")],
    "sm80": [("sass", "sm_80")],
}


def compile_kernels(name: str, flags: tuple[str, ...], out: Path) -> Path:
    target = out / f"lib{name}.so"
    argv = [NVCC, "-shared", "-cudart", "shared", "-Xcompiler", "-fPIC", *flags,
            "-Xlinker", "--enable-new-dtags", "-Xlinker", f"-rpath={RUNPATH}",
            "-o", str(target), str(out / "kernel.cu")]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not HAVE_NVCC:
        pytest.skip("nvcc is not installed on this host")
    if nvcc_release() < (13, 0):
        pytest.skip("the PTX ISA versions expected here are those of CUDA 13's nvcc")
    out = tmp_path_factory.mktemp("kernels")
    (out / "kernel.cu").write_text(KERNEL)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda item: compile_kernels(*item, out), BUILDS.items())
        return dict(zip(BUILDS, done, strict=True))


def kernel_wheel(lib: Path, out: Path, version: str = "1.0+cu130", requires: str = "") -> Path:
    files: dict[str, bytes | Path] = {"demo/__init__.py": b"", f"demo/lib/{lib.name}": lib}
    reqs = [requires or "nvidia-cuda-runtime>=13"]
    return make_wheel(out, files, version=version, requires=reqs)


def audit(path: Path, *archs: str, vendor: str = "nvidia") -> WheelAudit:
    return audit_wheel(path, load_vendor_policy(vendor), cuda_architectures=archs)


def cuda_findings(result: WheelAudit) -> list[tuple[str, str, str | None]]:
    return [(f.severity, f.code, f.member) for f in result.findings if f.code.startswith("cuda")]


# -- the three -gencode mixes against a declared 90 ---------------------------------------------


@pytest.mark.nvcc
@pytest.mark.parametrize(
    ("name", "sass", "ptx"),
    [("sm90", ["sm_90"], []), ("sm80-ptx80", ["sm_80"], ["compute_80"])],
)
def test_device_code_that_runs_on_the_declared_architecture_passes_and_is_listed(
    libraries: dict[str, Path], tmp_path: Path, name: str, sass: list[str], ptx: list[str]
) -> None:
    result = audit(kernel_wheel(libraries[name], tmp_path), "90")
    assert cuda_findings(result) == [] and result.ok, render_text([result])
    (elf,) = to_json([result])["wheels"][0]["elfs"]
    assert (elf["cuda"]["sass"], elf["cuda"]["ptx"]) == (sass, ptx)
    cuda = to_json([result])["wheels"][0]["cuda"]
    assert (cuda["sass"], cuda["ptx"], cuda["architectures"]) == (sass, ptx, ["90"])
    assert (cuda["runtime"], cuda["runtime_from"]) == ("13.0", "local version +cu130")
    text = render_text([result])
    listing = f"SASS {', '.join(sass)}; PTX {', '.join(ptx) or 'none'}"
    assert f"      CUDA device code: {listing}" in text
    assert "CUDA architectures: 90; checked against the CUDA 13.0 runtime" in text


@pytest.mark.nvcc
def test_ptx_is_listed_with_its_isa_version(libraries: dict[str, Path], tmp_path: Path) -> None:
    result = audit(kernel_wheel(libraries["sm80-ptx80"], tmp_path), "90")
    (elf,) = to_json([result])["wheels"][0]["elfs"]
    ptx = [i for i in elf["cuda"]["images"] if i["kind"] == "ptx"]
    assert [(i["target"], i["ptx_isa"]) for i in ptx] == [("compute_80", "9.0")]
    assert "PTX compute_80 (PTX ISA 9.0)" in render_text([result])


@pytest.mark.nvcc
def test_device_code_without_the_declared_architecture_is_a_violation_saying_what_breaks(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    path = kernel_wheel(libraries["sm80"], tmp_path)
    result = audit(path, "90")
    (finding,) = [f for f in result.violations if f.code == "cuda-arch"]
    assert finding.member == "demo/lib/libsm80.so"
    assert "no kernel image is available for execution on the device" in finding.message
    assert "declared architecture 90 (compute capability 9.0)" in finding.message
    assert "this file has SASS sm_80; PTX none" in finding.message
    assert audit(path, "80").ok  # what it was built for
    assert audit(path).ok  # nothing declared: listed, not judged
    assert "CUDA architectures: none declared" in render_text([audit(path)])


@pytest.mark.nvcc
def test_ptx_newer_than_the_declared_runtime_is_a_warning_naming_the_driver(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    # No local version: the runtime is the lowest nvidia-cuda-runtime the wheel admits.
    path = kernel_wheel(libraries["sm80-ptx80"], tmp_path, "1.0", "nvidia-cuda-runtime>=12.4")
    result = audit(path, "90")
    assert result.ok and result.cuda is not None and result.cuda.runtime == "12.4"
    (warning,) = [f for f in result.warnings if f.code == "cuda-ptx"]
    assert "PTX ISA 9.0 (compute_80)" in warning.message
    assert "driver >= 580.65.06" in warning.message and "12.4" in warning.message


@pytest.mark.nvcc
def test_other_vendors_list_device_code_without_judging_it(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    result = audit(kernel_wheel(libraries["sm80"], tmp_path, "1.0+cpu"), "90", vendor="cpu")
    assert cuda_findings(result) == []
    assert result.cuda is not None and not result.cuda.checked
    assert result.cuda.sass == ("sm_80",)


# -- the command line and the pipeline ---------------------------------------------------------


@pytest.mark.nvcc
def test_cli_takes_architectures_from_flags_and_from_a_manifest(
    libraries: dict[str, Path], tmp_path: Path, cli, home: Path
) -> None:  # type: ignore[no-untyped-def]
    path = kernel_wheel(libraries["sm80"], tmp_path / "w")
    bad: CliResult = cli("audit", path, "--cuda-arch", "90", "--cuda-arch", "80", "--json")
    assert bad.code == 6
    data = json.loads(bad.out)["wheels"][0]
    assert data["cuda"]["architectures"] == ["90", "80"]
    assert [v["code"] for v in data["violations"]] == ["cuda-arch"]
    stack = tmp_path / "mini-stack"
    shutil.copytree(MINI, stack)
    manifest = stack / "stack.yaml"
    manifest.write_text(manifest.read_text().replace('["75"]', '["80"]'))
    good: CliResult = cli("audit", path, "--manifest", manifest)
    assert good.code == 0, good.out
    assert "CUDA architectures: 80; checked against the CUDA 13.0 runtime" in good.out
    typo: CliResult = cli("audit", path, "--cuda-arch", "sm90x")
    assert typo.code == 2 and "not a CUDA architecture: 'sm90x'" in typo.err


@pytest.mark.nvcc
def test_the_pipeline_audit_holds_the_wheel_to_the_stacks_architectures(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    from builder.pipeline.wheel import audit_or_keep

    path = kernel_wheel(libraries["sm80"], tmp_path / "w")
    audit_or_keep(path, "nvidia", tmp_path / "keep", ("80",))
    with pytest.raises(AuditError, match="no kernel image is available") as raised:
        audit_or_keep(path, "nvidia", tmp_path / "keep", ("90",))
    assert (tmp_path / "keep" / "rejected" / path.name).is_file(), raised.value


@pytest.mark.nvcc
def test_device_code_comes_from_the_cache_as_it_was_read(
    libraries: dict[str, Path], tmp_path: Path
) -> None:
    path = kernel_wheel(libraries["sm80-ptx80"], tmp_path / "w")
    policy = load_vendor_policy("nvidia")
    first = audit_wheel(path, policy, cache_dir=tmp_path / "cache", cuda_architectures=["90"])
    again = audit_wheel(path, policy, cache_dir=tmp_path / "cache", cuda_architectures=["90"])
    assert (first.stats.cached_batches, again.stats.cached_batches) == (0, again.stats.batches)
    assert again.elfs[0].device == first.elfs[0].device is not None
    assert to_json([again])["wheels"][0]["cuda"] == to_json([first])["wheels"][0]["cuda"]


@pytest.mark.nvcc
@needs_cuobjdump
@pytest.mark.parametrize("name", list(BUILDS))
def test_listed_architectures_match_cuobjdump(
    libraries: dict[str, Path], tmp_path: Path, name: str
) -> None:
    dumped = listed(cuobjdump("--list-elf", "--list-ptx", libraries[name]))
    assert sorted(set(dumped)) == LISTED[name]
    (elf,) = to_json([audit(kernel_wheel(libraries[name], tmp_path))])["wheels"][0]["elfs"]
    ours = [("sass", t) for t in elf["cuda"]["sass"]]
    ours += [("ptx", t.replace("compute_", "sm_")) for t in elf["cuda"]["ptx"]]
    assert sorted(ours) == sorted(set(dumped))
    images = {(i["kind"], i["target"]): i["count"] for i in elf["cuda"]["images"]}
    counts = {(k, t.replace("sm_", "compute_") if k == "ptx" else t): dumped.count((k, t))
              for k, t in set(dumped)}  # fmt: skip
    assert images == counts


@pytest.mark.nvcc
@pytest.mark.parametrize("name", list(BUILDS))
def test_the_headers_seen_while_streaming_are_all_a_read_of_nvccs_layout_needs(
    libraries: dict[str, Path], name: str
) -> None:
    data = libraries[name].read_bytes()
    tap = FatbinTap()
    for start in range(0, len(data), 4096):  # as the inflater hands out parts
        tap.feed(data[start : start + 4096])
    span = section_span(data, ".nv_fatbin")
    assert span is not None and tap.seen.bytes_at
    offset, size = span
    blind = read_fatbin_at(Unreadable(len(data)), offset, size, ".nv_fatbin", tap.seen)
    assert blind == read_fatbin(data[offset : offset + size])


# -- what nvcc would not build -------------------------------------------------------------------


def c_array(name: str, data: bytes, section: str) -> str:
    body = ", ".join(str(b) for b in data)
    return (
        f'__attribute__((section("{section}"), aligned(8), used))\n'
        f"const unsigned char {name}[{len(data)}] = {{{body}}};\n"
    )


@with_gcc
def test_a_malformed_fat_binary_is_a_violation_naming_the_file(
    tmp_path: Path, cli, home: Path
) -> None:  # type: ignore[no-untyped-def]
    garbage = b"\x50\xed\x55\xba\x01\x00\x10\x00" + (1 << 40).to_bytes(8, "little")
    lib = Compiler(tmp_path / "build").shared(
        "libbroken.so", c_array("fatbin", garbage, ".nv_fatbin"), soname="libbroken.so"
    )
    path = make_wheel(tmp_path / "w", {"demo/__init__.py": b"", "demo/lib/libbroken.so": lib},
                      version="1.0+cu130")  # fmt: skip
    result: CliResult = cli("audit", path, "--cuda-arch", "90", "--no-cache")
    assert result.code == 6 and "Traceback" not in result.out + result.err
    (line,) = [x for x in result.out.splitlines() if "[cuda-fatbin]" in x]
    assert "demo/lib/libbroken.so: its CUDA fat binary cannot be read: .nv_fatbin" in line
    assert "runs past" in line or "left" in line


@with_gcc
def test_a_big_library_has_its_fat_binary_read_past_what_the_audit_keeps_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members, raw

    # Members over a gigabyte are not kept inflated; 64 MB stands in for that here.
    for module in (members, raw):
        monkeypatch.setattr(module, "SNAPSHOT_ABOVE", 64 << 20)
    data = fatbin(entry(ELF, 90), entry(PTX, 90, LINUX64, PTX_TEXT, (8, 7)))
    pad = raw.SNAPSHOT_ABOVE + (4 << 20)
    source = f"const unsigned char pad[{pad}] = {{1}};\n" + c_array("fb", data, ".nv_fatbin")
    lib = Compiler(tmp_path / "build").shared("libbig.so", source, soname="libbig.so")
    span = section_span(lib, ".nv_fatbin")
    assert span is not None and span[0] > KEEP_PREFIX  # past the inflated prefix
    path = make_wheel(tmp_path / "w", {"demo/__init__.py": b"", "demo/lib/libbig.so": lib},
                      version="1.0+cu130")  # fmt: skip
    lib.unlink()
    result = audit(path, "90")
    assert result.ok and result.cuda is not None, render_text([result])
    assert (result.cuda.sass, result.cuda.ptx) == (("sm_90",), ("compute_90",))
    assert "CUDA device code: SASS sm_90; PTX compute_90 (PTX ISA 8.7)" in render_text([result])
