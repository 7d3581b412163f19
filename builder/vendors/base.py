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

    cuda_architectures: tuple[str, ...] = ()
    local_version: str | None = None  # overrides the vendor's own wheel local version


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
