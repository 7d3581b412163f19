"""What every vendor plugin provides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from builder.core.host import HostFacts
    from builder.providers.probe import Places, Provider


@dataclass(frozen=True, kw_only=True)
class VendorSettings:
    """Per-vendor settings from stack.yaml (``vendors.<name>``)."""

    cuda_architectures: tuple[str, ...] = ()  # empty: the vendor's own set (never nvcc's)
    local_version: str | None = None  # overrides the vendor's own wheel local version
    # How nvcc compresses the fat binaries (FATBIN_COMPRESSION); None: nvcc's default.
    fatbin_compression: str | None = None


# What ``fatbin_compression`` may say, and the nvcc 13 flags each means. nvcc's default
# compresses the PTX only (zstd); ``-Xfatbin=-compress-all`` compresses the SASS too, and
# ``--compress-mode`` picks the codec (size: the smallest, speed: lz4, none: no compression).
FATBIN_COMPRESSION: dict[str, tuple[str, ...]] = {
    "default": (),
    "none": ("--compress-mode=none",),
    "all": ("-Xfatbin=-compress-all",),
    "size": ("--compress-mode=size", "-Xfatbin=-compress-all"),
}


class Vendor(Protocol):
    # Read-only: the plugins are frozen dataclasses.
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def places(self) -> Places:
        """Where its toolkit is looked for; preflight's probes read them (ProbeContext.places)."""
        ...

    @property
    def device_command(self) -> tuple[str, ...]:
        """What lists the vendor's devices (empty: the host itself is the device)."""
        ...

    def providers(self) -> tuple[Provider, ...]:
        """What the host must provide for this vendor (see builder.providers)."""
        ...

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]: ...

    def environment(self, host: HostFacts) -> dict[str, str]: ...

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str: ...

    def architectures(self, settings: VendorSettings) -> tuple[str, ...]:
        """The CUDA architectures every library with device code is built for, which the
        audit holds the wheel to: stack.yaml's, else the vendor's own; () without CUDA."""
        ...
