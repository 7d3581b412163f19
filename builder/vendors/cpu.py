"""CPU: a C++17 compiler and OpenMP; MPI for InfiniCCL's fallback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core.host import HostFacts
from builder.providers.probe import Places
from builder.vendors.base import VendorSettings

if TYPE_CHECKING:
    from builder.providers.probe import Provider


# No toolkit to look for.
PLACES = Places()


@dataclass(frozen=True)
class Cpu:
    name: str = "cpu"
    description: str = "CPU only (C++17 compiler, OpenMP, MPI)"
    # Lists the vendor's devices; a runtime check runs only where it finds one.
    device_command: tuple[str, ...] = ()  # the host itself
    places: Places = PLACES

    def providers(self) -> tuple[Provider, ...]:
        from builder.providers.common import TOOLS
        from builder.providers.cpu import CPU_PROVIDERS

        return (*TOOLS, *CPU_PROVIDERS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        return dict(host.hints)  # e.g. MPI_HOME, pybind11_DIR as preflight found them

    def environment(self, host: HostFacts) -> dict[str, str]:
        return {}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        return settings.local_version or "cpu"

    def architectures(self, settings: VendorSettings) -> tuple[str, ...]:
        return ()  # no CUDA device code


PLUGIN = Cpu()
