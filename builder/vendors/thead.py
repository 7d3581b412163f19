"""T-Head PPU (upstream's Python calls it ``ali``): the PPU SDK's CUDA-compatible nvcc."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from builder.vendors.base import HostFacts, Toolkit, VendorSettings, cuda_like_toolkit

PPU_ENV_VARS = ("THEAD_CUDA_ROOT", "PPU_CUDA_ROOT")
PPU_DERIVED = {"PPU_SDK_ROOT": "CUDA_SDK"}
PPU_DEFAULTS = ("/usr/local/PPU_SDK/CUDA_SDK",)
DEFAULT_ARCHITECTURES = ("80",)


@dataclass(frozen=True)
class Thead:
    name: str = "thead"
    aliases: tuple[str, ...] = ("ali", "ppu")
    description: str = "T-Head PPU through its CUDA-compatible SDK"

    def detect_toolkit(self, env: Mapping[str, str]) -> Toolkit | None:
        # No PATH fallback: an nvcc on PATH is far more likely NVIDIA's than the PPU SDK's.
        return cuda_like_toolkit({k: env[k] for k in env if k != "PATH"} | {"PATH": ""},
                                 PPU_ENV_VARS, PPU_DEFAULTS, derived=PPU_DERIVED)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PPU_DEFAULTS[0]
        compiler = host.toolkit.compiler if host.toolkit and host.toolkit.compiler else None
        arch = settings.cuda_architectures or DEFAULT_ARCHITECTURES
        return {
            "CUDAToolkit_ROOT": str(root),
            "CMAKE_CUDA_COMPILER": str(compiler or f"{root}/bin/nvcc"),
            "CMAKE_CUDA_ARCHITECTURES": ";".join(arch),
        }

    def environment(self, host: HostFacts) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PPU_DEFAULTS[0]
        return {"THEAD_CUDA_ROOT": str(root)}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        return "ppu" + "".join(version.split(".")[:2]) if version else "ppu"


THEAD = Thead()
