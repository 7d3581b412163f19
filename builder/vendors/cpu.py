"""CPU: a C++17 compiler and OpenMP; MPI for InfiniCCL's fallback."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from builder.vendors.base import HostFacts, Toolkit, VendorSettings


@dataclass(frozen=True)
class Cpu:
    name: str = "cpu"
    aliases: tuple[str, ...] = ()
    description: str = "CPU only (C++17 compiler, OpenMP, MPI)"

    def detect_toolkit(self, env: Mapping[str, str]) -> Toolkit | None:
        return None

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        return {}

    def environment(self, host: HostFacts) -> dict[str, str]:
        return {}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        return settings.local_version or "cpu"


CPU = Cpu()
