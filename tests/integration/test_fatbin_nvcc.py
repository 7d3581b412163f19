"""The fat binary reader on what nvcc builds, checked against the -gencode flags and cuobjdump.

Each library is compiled once per module from one tiny kernel. cuobjdump comes from the CUDA
toolkit or from the ``nvidia-cuda-cuobjdump`` wheel (``site-packages/nvidia/cu13/bin``); the
comparisons with it skip when neither is there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tests.conftest import HAVE_NVCC
from wheels.cuda import FATBIN_SECTIONS
from wheels.cuda.arch import check_device_code, ptx_toolkit
from wheels.cuda.fatbin import DeviceCode, FatbinEntry, read_device_code

pytestmark = [
    pytest.mark.integration,
    pytest.mark.nvcc,
    pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed on this host"),
]

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
KERNEL = """
__global__ void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
extern "C" void launch(float *a, const float *b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }
"""
DEFAULT = {"sass": None, "ptx": "zstd"}
EVERYTHING = {"sass": "zstd", "ptx": "zstd"}


def gencode(arch: str, *codes: str) -> tuple[str, str]:
    return ("-gencode", f"arch=compute_{arch},code=[{','.join(codes)}]")


@dataclass(frozen=True)
class Build:
    """A library nvcc builds, and what the loaded image must hold: these facts are nvcc 13's."""

    name: str
    flags: tuple[str, ...]
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    compression: Mapping[str, str | None] = field(default_factory=lambda: DEFAULT)
    shared: bool = True
    debug: bool = False


BUILDS = (
    Build("sm80", gencode("80", "sm_80"), ("sm_80",), ()),
    Build("sm90-ptx90", gencode("90", "sm_90", "compute_90"), ("sm_90",), ("compute_90",)),
    Build("ptx80", gencode("80", "compute_80"), (), ("compute_80",)),
    Build("sm90a", gencode("90a", "sm_90a", "compute_90a"), ("sm_90a",), ("compute_90a",)),
    Build(
        "family",
        (*gencode("100f", "sm_100f", "compute_100f"), *gencode("120f", "sm_120f")),
        ("sm_100f", "sm_120f"),
        ("compute_100f",),
    ),
    Build(
        "compress-all",
        (*gencode("90", "sm_90", "compute_90"), "-Xfatbin", "-compress-all"),
        ("sm_90",),
        ("compute_90",),
        EVERYTHING,
    ),
    Build(
        "no-compression",
        (*gencode("90", "sm_90", "compute_90"), "--compress-mode=none"),
        ("sm_90",),
        ("compute_90",),
        {"sass": None, "ptx": None},
    ),
    Build(
        "lz4",
        (
            *gencode("90", "sm_90", "compute_90"),
            "--compress-mode=speed",
            "-Xfatbin",
            "-compress-all",
        ),
        ("sm_90",),
        ("compute_90",),
        {"sass": "lz4", "ptx": "lz4"},
    ),
    Build(
        "rdc-object",
        ("-rdc=true", "-c", "-G", *gencode("80", "sm_80"), *gencode("90", "compute_90")),
        ("sm_80",),
        ("compute_90",),
        EVERYTHING,
        shared=False,
        debug=True,
    ),
    Build(
        "rdc-shared",
        ("-rdc=true", *gencode("80", "sm_80"), *gencode("90", "compute_90")),
        ("sm_80",),
        (),
    ),
)
BY_NAME = {b.name: b for b in BUILDS}


def nvcc_release() -> tuple[int, int]:
    out = subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"release (\d+)\.(\d+)", out)
    assert found, out
    return int(found.group(1)), int(found.group(2))


def compile_build(build: Build, src: Path, out: Path) -> Path:
    target = out / (f"lib{build.name}.so" if build.shared else f"{build.name}.o")
    link = ["-shared", "-cudart", "shared"] if build.shared else []
    argv = [NVCC, *link, "-Xcompiler", "-fPIC", *build.flags, "-o", str(target), str(src)]
    subprocess.run(argv, check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if nvcc_release() < (13, 0):
        pytest.skip("these -gencode mixes and compression modes are those of CUDA 13's nvcc")
    out = tmp_path_factory.mktemp("fatbin")
    src = out / "kernel.cu"
    src.write_text(KERNEL)
    with ThreadPoolExecutor(max_workers=2) as pool:
        paths = pool.map(lambda b: compile_build(b, src, out), BUILDS)
        return {b.name: p for b, p in zip(BUILDS, paths, strict=True)}


def device_code(path: Path) -> DeviceCode:
    with path.open("rb") as f:
        elf = ELFFile(f)
        wanted = (elf.get_section_by_name(name) for name in FATBIN_SECTIONS)
        return read_device_code({s.name: s.data() for s in wanted if s is not None})


# -- what the -gencode flags ask for -------------------------------------------------------------


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_loaded_image_holds_what_the_gencode_flags_ask_for(
    built: dict[str, Path], name: str
) -> None:
    build = BY_NAME[name]
    loaded = device_code(built[name]).loaded()
    assert (loaded.sass_archs, loaded.ptx_archs) == (build.sass, build.ptx)
    kinds = {e.kind for e in loaded.entries}
    compression = {e.kind: e.compression for e in loaded.entries}
    assert compression == {k: v for k, v in build.compression.items() if k in kinds}
    assert {e.debug for e in loaded.entries} == {build.debug}


def test_ptx_carries_the_ptx_isa_version_of_the_nvcc_that_wrote_it(
    built: dict[str, Path],
) -> None:
    release = nvcc_release()
    for name in ("sm90-ptx90", "ptx80", "sm90a", "compress-all", "no-compression", "lz4"):
        for entry in device_code(built[name]).loaded().entries:
            if entry.kind == "ptx":
                assert entry.ptx_version is not None
                assert ptx_toolkit(entry.ptx_version) == release, (name, entry)


def test_relocatable_device_code_is_kept_apart_from_the_linked_image(
    built: dict[str, Path],
) -> None:
    code = device_code(built["rdc-shared"])
    assert code.sections == FATBIN_SECTIONS
    linked = [e.target for e in code.entries if not e.relocatable]
    relocatable = [e.target for e in code.entries if e.relocatable]
    assert (linked, relocatable) == (["sm_80"], ["sm_80", "compute_90"])


def test_architecture_findings_on_built_libraries(built: dict[str, Path]) -> None:
    (missing,) = check_device_code(device_code(built["sm80"]), ["80", "86", "90"], (13, 0))
    assert missing.severity == "violation"
    assert "declared architecture 90 (compute capability 9.0)" in missing.message
    ptx_only = device_code(built["ptx80"])
    assert check_device_code(ptx_only, ["80", "90", "120"], (13, 0)) == ()
    (old_driver,) = check_device_code(ptx_only, ["80"], (12, 4))
    assert old_driver.severity == "warning" and "driver >= 580.65.06" in old_driver.message
    (specific,) = check_device_code(device_code(built["sm90a"]), ["90a", "100"], (13, 0))
    assert "declared architecture 100 " in specific.message
    assert check_device_code(device_code(built["family"]), ["100f", "120f"], (13, 0)) == ()


# -- what cuobjdump sees ---------------------------------------------------------------------------


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, in /usr/local/cuda, or from a pip-installed NVIDIA or Triton wheel."""
    found = shutil.which("cuobjdump")
    candidates = [Path(found)] if found else []
    candidates.append(Path("/usr/local/cuda/bin/cuobjdump"))
    for package, tail in (
        ("nvidia", ("cu13", "bin")),
        ("nvidia", ("cuda_cuobjdump", "bin")),
        ("triton", ("backends", "nvidia", "bin")),
    ):
        spec = importlib.util.find_spec(package)
        roots = (spec.submodule_search_locations or []) if spec else []
        candidates.extend(Path(root, *tail, "cuobjdump") for root in roots)
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


CUOBJDUMP = find_cuobjdump()
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None,
    reason="cuobjdump is absent (not on PATH, in /usr/local/cuda/bin, or in site-packages): "
    "pip install 'nvidia-cuda-cuobjdump>=13.2,<14'",
)


def cuobjdump(*args: str | Path) -> str:
    assert CUOBJDUMP is not None
    argv = [CUOBJDUMP, *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


Header = tuple[str, str, tuple[int, int], bool, bool]


def dumped_headers(text: str) -> list[Header]:
    """(kind, arch, code version, compressed, debug) of each "Fatbin elf/ptx code:" block."""
    out: list[Header] = []
    for block in re.finditer(r"^Fatbin (elf|ptx) code:\n=+\n(.*?)\n\n", text, re.M | re.S):
        lines = block.group(2).splitlines()
        fields = dict(line.split(" = ", 1) for line in lines if " = " in line)
        major, minor = re.findall(r"\d+", fields["code version"])
        kind = "sass" if block.group(1) == "elf" else "ptx"
        flags = ("compressed" in lines, "has debug info" in lines)
        out.append((kind, fields["arch"], (int(major), int(minor)), *flags))
    return out


def our_headers(entries: tuple[FatbinEntry, ...]) -> list[Header]:
    return [
        (e.kind, f"sm_{e.arch}{e.variant}", e.code_version, e.compressed, e.debug)
        for e in entries
        if e.kind in ("sass", "ptx")
    ]


def listed(text: str) -> list[tuple[str, str]]:
    """(kind, arch) of each file ``cuobjdump --list-elf --list-ptx`` names, in its order."""
    found = re.findall(r"^(ELF|PTX) file\s+\d+: \S*\.(sm_\w+)\.(?:cubin|ptx)$", text, re.M)
    return [("sass" if kind == "ELF" else "ptx", arch) for kind, arch in found]


def our_listing(entries: tuple[FatbinEntry, ...]) -> list[tuple[str, str]]:
    """What cuobjdump lists for these entries: its cubin names drop a family "f"."""
    return [
        (e.kind, f"sm_{e.arch}{'' if e.kind == 'sass' and e.variant == 'f' else e.variant}")
        for e in entries
        if e.kind in ("sass", "ptx")
    ]


@needs_cuobjdump
@pytest.mark.parametrize("name", list(BY_NAME))
def test_entries_match_what_cuobjdump_dumps(built: dict[str, Path], name: str) -> None:
    expected = dumped_headers(cuobjdump("-elf", "-ptx", built[name]))
    assert expected
    assert our_headers(device_code(built[name]).loaded().entries) == expected


@needs_cuobjdump
@pytest.mark.parametrize("name", list(BY_NAME))
def test_entries_match_what_cuobjdump_lists(built: dict[str, Path], name: str) -> None:
    expected = listed(cuobjdump("--list-elf", "--list-ptx", built[name]))
    assert our_listing(device_code(built[name]).loaded().entries) == expected


@needs_cuobjdump
def test_every_section_matches_cuobjdump_all(built: dict[str, Path]) -> None:
    path = built["rdc-shared"]
    expected = dumped_headers(cuobjdump("-all", "-elf", "-ptx", path))
    assert our_headers(device_code(path).entries) == expected
