"""T-Head PPU (upstream's Python calls it ``ali``): the PPU SDK's CUDA-compatible nvcc."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core.host import HostFacts
from builder.providers.probe import Places
from builder.vendors.base import VendorSettings

if TYPE_CHECKING:
    from builder.providers.probe import Provider

DEFAULT_ARCHITECTURES = ("80",)
# Where the toolkit is looked for, in upstream's order (preflight's probes read these).
PLACES = Places(
    env=("THEAD_CUDA_ROOT", "PPU_CUDA_ROOT"),
    derived={"PPU_SDK_ROOT": "CUDA_SDK"},
    defaults=("/usr/local/PPU_SDK/CUDA_SDK",),
)


@dataclass(frozen=True)
class Thead:
    name: str = "thead"
    description: str = "T-Head PPU through its CUDA-compatible SDK"
    # Lists the vendor's devices; a runtime check runs only where it finds one.
    device_command: tuple[str, ...] = ("ppu-smi", "-L")
    places: Places = PLACES

    def providers(self) -> tuple[Provider, ...]:
        from builder.providers.common import TOOLS
        from builder.providers.cpu import CPU_PROVIDERS
        from builder.providers.ppu import THEAD_PROVIDERS

        return (*TOOLS, *CPU_PROVIDERS, *THEAD_PROVIDERS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PLACES.defaults[0]
        compiler = host.toolkit.compiler if host.toolkit and host.toolkit.compiler else None
        return {
            "CUDAToolkit_ROOT": str(root),
            "CMAKE_CUDA_COMPILER": str(compiler or f"{root}/bin/nvcc"),
            "CMAKE_CUDA_ARCHITECTURES": ";".join(self.architectures(settings)),
            **host.hints,
        }

    def environment(self, host: HostFacts) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PLACES.defaults[0]
        return {"THEAD_CUDA_ROOT": str(root)}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        return "ppu" + "".join(version.split(".")[:2]) if version else "ppu"

    def architectures(self, settings: VendorSettings) -> tuple[str, ...]:
        return settings.cuda_architectures or DEFAULT_ARCHITECTURES


PLUGIN = Thead()
