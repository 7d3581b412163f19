"""The bundled mini stack built for real with cmake, ninja and the compilers; its wheel
assembled, audited, installed into a fresh virtual environment and imported."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from tests.conftest import HAVE_NVCC, last_report

pytestmark = pytest.mark.integration


def needed(data: bytes) -> list[str]:
    import io

    elf = ELFFile(io.BytesIO(data))
    out: list[str] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def test_cpu_build_installs_every_component_into_its_own_store_entry(
    home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    report = last_report(home)
    assert [c["status"] for c in report["components"]] == ["built"] * 4
    prefixes = {c["name"]: Path(c["prefix"]) for c in report["components"]}
    assert (prefixes["minirt"] / "lib" / "libminirt.so").is_file()
    assert (prefixes["miniops"] / "lib" / "libminiops.so").is_file()
    assert (prefixes["minilm"] / "python" / "minicore" / "lib" / "libminicore_runtime.so").is_file()
    assert len(set(prefixes.values())) == 4
    assert all(p.is_relative_to(home / "store") for p in prefixes.values())
    # Nothing is ever written into the component sources.
    assert not list(mini.parent.rglob("CMakeCache.txt"))


def test_edited_path_source_rebuilds_only_it_and_its_dependents(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    ccl = mini.parent / "ccl" / "src" / "ccl.cpp"
    ccl.write_text(ccl.read_text() + "\n// touched\n")
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 0, result.err
    status = {c["name"]: c["status"] for c in last_report(shared_home)["components"]}
    assert status == {"minirt": "hit", "miniops": "hit", "miniccl": "built", "minilm": "built"}


def test_failing_compile_exits_5_names_component_step_and_keeps_the_log(
    home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    broken = mini.parent / "ccl" / "src" / "ccl.cpp"
    broken.write_text(broken.read_text() + "\nthis is not C++;\n")
    result = cli("build", "--manifest", mini, "--vendor", "cpu")
    assert result.code == 5
    assert "component 'miniccl', step build" in result.err
    assert "this is not C++" in result.err  # the tail of the compiler's output
    log = Path(result.err.split("full log: ")[1].split()[0])
    assert log.is_file() and "this is not C++" in log.read_text()
    assert "Traceback" not in result.err
    statuses = {c["name"]: c["status"] for c in last_report(home)["components"]}
    assert statuses["miniccl"] == "failed"
    assert statuses["minilm"] == "skipped"
    records = [json.loads(p.read_text()) for p in (home / "store").glob("*/record.json")]
    assert "miniccl" not in {r["name"] for r in records}


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host")
def test_nvidia_build_compiles_cuda_and_links_cudart(home: Path, mini: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("build", "--manifest", mini, "--vendor", "nvidia")
    assert result.code == 0, result.err
    report = last_report(home)
    rt = next(c for c in report["components"] if c["name"] == "minirt")
    lib = (Path(rt["prefix"]) / "lib" / "libminirt.so").read_bytes()
    assert any("libcudart" in n for n in needed(lib))


def make_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(path)
    return path / "bin" / "python"


def test_cpu_wheel_audits_installs_and_imports_from_a_clean_venv(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "dist"
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out)
    assert result.code == 0, result.err
    (wheel,) = out.glob("*.whl")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name == f"infini_mini-0.1.0+cpu-{tag}-{tag}-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        elves = {n: zf.read(n) for n in names if n.endswith(".so")}
    assert {
        "minicore/lib/libminirt.so",
        "minicore/lib/libminiops.so",
        "minicore/lib/libminiccl.so",
        "minicore/lib/libminicore_runtime.so",
    } <= set(elves)
    for name, data in elves.items():
        assert not any(n.startswith("libpython") for n in needed(data)), name
    python = make_venv(tmp_path / "venv")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", str(wheel)], check=True)
    probe = subprocess.run(
        [
            python,
            "-c",
            "import minicore; print(minicore.backends(), minicore.ops(), "
            "minicore.allreduce_sum([1.0, 2.0]), minicore.add([1.0], [2.0]))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "cpu ['add', 'mul', 'gemm'] [1.0, 2.0] [3.0]"


@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_ENABLE_SHARED"),
    reason="this interpreter has no shared libpython to link against",
)
def test_wheel_whose_extension_links_libpython_is_refused_with_exit_6_and_kept(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cmake = mini.parent / "engine" / "CMakeLists.txt"
    cmake.write_text(
        cmake.read_text()
        + (
            "\nfind_package(Python REQUIRED COMPONENTS Development.Embed)\n"
            "target_link_libraries(_minicore PRIVATE Python::Python)\n"
        )
    )
    out = tmp_path / "dist"
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out)
    assert result.code == 6, result.err
    assert "libpython" in result.err
    assert "Traceback" not in result.err
    assert not out.exists() or not any(out.iterdir())
    kept = Path(result.err.split("it was kept at ")[1].split()[0])
    assert kept.is_file() and kept.parent.name == "rejected"


def test_unwritable_output_directory_is_an_error_not_a_traceback(
    shared_home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the output directory should be\n")
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", blocker / "dist")
    assert result.code != 0
    assert "Traceback" not in result.err
    assert "error:" in result.err and "not-a-dir" in result.err
