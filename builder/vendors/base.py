"""What every vendor plugin provides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from builder.core.host import HostFacts
    from builder.manifest.model import VendorSettings
    from builder.providers.probe import Provider


class Vendor(Protocol):
    # Read-only: the plugins are frozen dataclasses.
    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...

    @property
    def description(self) -> str: ...

    def providers(self) -> tuple[Provider, ...]:
        """What the host must provide for this vendor (see builder.providers)."""
        ...

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]: ...

    def environment(self, host: HostFacts) -> dict[str, str]: ...

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str: ...
