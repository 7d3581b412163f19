"""NVIDIA CUDA: nvcc, cudart, cuBLAS/cuBLASLt, NCCL; the driver (libcuda.so.1) at run time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from builder.vendors.base import HostFacts, Toolkit, VendorSettings, cuda_like_toolkit

# Upstream's order: CMake's CUDAToolkit hints, then the default install, then nvcc on PATH.
CUDA_ENV_VARS = ("CUDA_HOME", "CUDA_PATH")
CUDA_DEFAULTS = ("/usr/local/cuda",)


@dataclass(frozen=True)
class Nvidia:
    name: str = "nvidia"
    aliases: tuple[str, ...] = ("cuda",)
    description: str = "NVIDIA GPUs through CUDA"

    def detect_toolkit(self, env: Mapping[str, str]) -> Toolkit | None:
        return cuda_like_toolkit(env, CUDA_ENV_VARS, CUDA_DEFAULTS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        defines: dict[str, str] = {}
        tk = host.toolkit
        if tk is not None:
            defines["CUDAToolkit_ROOT"] = str(tk.root)
            if tk.compiler is not None:
                defines["CMAKE_CUDA_COMPILER"] = str(tk.compiler)
        if settings.cuda_architectures:
            defines["CMAKE_CUDA_ARCHITECTURES"] = ";".join(settings.cuda_architectures)
        return defines

    def environment(self, host: HostFacts) -> dict[str, str]:
        tk = host.toolkit
        return {"CUDA_HOME": str(tk.root)} if tk is not None else {}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        if not version:
            return "cuda"
        major, _, minor = version.partition(".")
        return f"cu{major}{minor or '0'}"


NVIDIA = Nvidia()
