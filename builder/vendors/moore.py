"""Moore Threads MUSA: mcc, libmusa/libmusart, muBLAS, muDNN, MCCL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core.host import HostFacts
from builder.providers.probe import Places
from builder.vendors.base import VendorSettings

if TYPE_CHECKING:
    from builder.providers.probe import Provider

# Where the toolkit is looked for, in upstream's order (preflight's probes read these).
PLACES = Places(env=("MUSA_ROOT", "MUSA_HOME", "MUSA_PATH"), defaults=("/usr/local/musa",))


@dataclass(frozen=True)
class Moore:
    name: str = "moore"
    description: str = "Moore Threads GPUs through MUSA"
    # Lists the vendor's devices; a runtime check runs only where it finds one.
    device_command: tuple[str, ...] = ("mthreads-gmi", "-L")
    places: Places = PLACES

    def providers(self) -> tuple[Provider, ...]:
        from builder.providers.common import TOOLS
        from builder.providers.cpu import CPU_PROVIDERS
        from builder.providers.musa import MOORE_PROVIDERS

        return (*TOOLS, *CPU_PROVIDERS, *MOORE_PROVIDERS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PLACES.defaults[0]
        return {"MUSA_ROOT": str(root), **host.hints}

    def environment(self, host: HostFacts) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else PLACES.defaults[0]
        return {"MUSA_ROOT": str(root), "MUSA_HOME": str(root)}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        return "musa" + "".join(version.split(".")[:2]) if version else "musa"

    def architectures(self, settings: VendorSettings) -> tuple[str, ...]:
        return ()  # no CUDA device code


PLUGIN = Moore()
