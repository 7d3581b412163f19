"""What every vendor plugin provides, and the host facts planning depends on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from builder.providers.probe import Provider


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    """A vendor toolkit found on the host (or the default place it would be)."""

    root: Path
    compiler: Path | None
    version: str | None
    found: bool
    source: str  # where the root came from: an env var name, "default path" or "PATH"


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    """Everything about the host that planning may depend on; detected once, passed in."""

    python: str
    python_version: str
    soabi: str
    pybind11_dir: str | None
    cpu_count: int
    pybind11_version: str | None = None
    cxx: str = ""
    cxx_version: str = ""
    cmake: str = "cmake"
    toolkit: Toolkit | None = None
    env: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    # Provider fingerprints (name -> "version@path") recorded by preflight; part of cache keys.
    providers: Mapping[str, str] = field(default_factory=dict)
    # CMake cache variables preflight found (NCCL_LIB, FETCHCONTENT_SOURCE_DIR_CUTLASS, ...);
    # vendors pass them on in cmake_defines, so they are part of cache keys too.
    hints: Mapping[str, str] = field(default_factory=dict)
    # The same, narrowed to what each component uses: an NCCL upgrade must not change the key
    # of a component that never looks at NCCL. Planning prefers these when present.
    component_providers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    component_hints: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


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
    def aliases(self) -> tuple[str, ...]: ...

    @property
    def description(self) -> str: ...

    def providers(self) -> tuple[Provider, ...]:
        """What the host must provide for this vendor (see builder.providers)."""
        ...

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]: ...

    def environment(self, host: HostFacts) -> dict[str, str]: ...

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str: ...
