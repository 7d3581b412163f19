"""NVIDIA CUDA: nvcc, cudart, cuBLAS/cuBLASLt, NCCL; the driver (libcuda.so.1) at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core.host import HostFacts
from builder.providers.probe import Places
from builder.vendors.base import FATBIN_COMPRESSION, VendorSettings

if TYPE_CHECKING:
    from builder.providers.probe import Provider

# The GPUs users have: A100 (sm_80), A10/RTX 30 (sm_86), L40S/RTX 40 (sm_89), H100/H200 (sm_90)
# as SASS, and PTX for the newest, which later GPUs JIT. CMake's "-real" is SASS alone; a plain
# number is SASS and PTX. InfiniTensor's CI builds InfiniLM for sm_80,sm_86,sm_89,sm_90 too.
# Without a set CMake would pass nvcc's default (sm_75 for nvcc 13) to every CUDA target.
DEFAULT_ARCHITECTURES = ("80-real", "86-real", "89-real", "90")
# nvcc flags that make two compiles of one source byte-identical (cmake_defines says why).
NVCC_DETERMINISM = "--objdir-as-tempdir"
# Where the toolkit is looked for, in upstream's order (preflight's probes read these).
PLACES = Places(env=("CUDA_HOME", "CUDA_PATH"), defaults=("/usr/local/cuda",))


@dataclass(frozen=True)
class Nvidia:
    name: str = "nvidia"
    description: str = "NVIDIA GPUs through CUDA"
    # Lists the vendor's devices; a runtime check runs only where it finds one.
    device_command: tuple[str, ...] = ("nvidia-smi", "-L")  # one line per GPU
    places: Places = PLACES

    def providers(self) -> tuple[Provider, ...]:
        from builder.providers.common import TOOLS
        from builder.providers.cpu import CPU_PROVIDERS
        from builder.providers.cuda import NVIDIA_PROVIDERS

        return (*TOOLS, *CPU_PROVIDERS, *NVIDIA_PROVIDERS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        defines: dict[str, str] = {}
        tk = host.toolkit
        if tk is not None:
            defines["CUDAToolkit_ROOT"] = str(tk.root)
            if tk.compiler is not None:
                defines["CMAKE_CUDA_COMPILER"] = str(tk.compiler)
        # Every component gets the set, so that any CUDA target (InfiniRT's, InfiniCCL's, not
        # only InfiniOps') is built for it; a source with its own -gencode adds to it.
        defines["CMAKE_CUDA_ARCHITECTURES"] = ";".join(self.architectures(settings))
        # nvcc names its intermediate files /tmp/tmpxft_<pid>_<n>-<k>_<source>.cudafe1.cpp, and
        # the host compiler writes that name into the object (its STT_FILE symbol in .symtab):
        # two compiles of one source differ. With --objdir-as-tempdir they are named after the
        # object file instead (plan_paths.path_maps adds the host compiler's prefix maps, which
        # also map __FILE__ in device code).
        compression = FATBIN_COMPRESSION[settings.fatbin_compression or "default"]
        defines["CMAKE_CUDA_FLAGS_INIT"] = " ".join((NVCC_DETERMINISM, *compression))
        # What preflight found wins: the toolkit it chose, NCCL_LIB/NCCL_INC (InfiniCCL's
        # find_library has no hints), FETCHCONTENT_SOURCE_DIR_CUTLASS, CUDA_cublas_LIBRARY, ...
        defines.update(host.hints)
        return defines

    def environment(self, host: HostFacts) -> dict[str, str]:
        root = host.hints.get("CUDAToolkit_ROOT") or (
            str(host.toolkit.root) if host.toolkit else None
        )
        return {"CUDA_HOME": root} if root else {}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        if not version:
            return "cuda"
        major, _, minor = version.partition(".")
        return f"cu{major}{minor or '0'}"

    def architectures(self, settings: VendorSettings) -> tuple[str, ...]:
        return settings.cuda_architectures or DEFAULT_ARCHITECTURES


PLUGIN = Nvidia()
