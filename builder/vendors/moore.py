"""Moore Threads MUSA: mcc, libmusa/libmusart, muBLAS, muDNN, MCCL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder import proc
from builder.vendors.base import HostFacts, Toolkit, VendorSettings, locate_root
from builder.vendors.places import MUSA_DEFAULTS, MUSA_ENV_VARS

if TYPE_CHECKING:
    from builder.providers.probe import Provider

__all__ = ["MOORE", "MUSA_DEFAULTS", "MUSA_ENV_VARS"]


@dataclass(frozen=True)
class Moore:
    name: str = "moore"
    aliases: tuple[str, ...] = ("musa", "mthreads")
    description: str = "Moore Threads GPUs through MUSA"

    def detect_toolkit(self, env: Mapping[str, str]) -> Toolkit | None:
        located = locate_root(env, MUSA_ENV_VARS, MUSA_DEFAULTS, "mcc")
        if located is None:
            return None
        root, source = located
        mcc = root / "bin" / "mcc"
        if not mcc.exists():
            return Toolkit(root=root, compiler=None, version=None, found=False, source=source)
        out = proc.capture([str(mcc), "--version"], check=False, timeout=30)
        from builder.providers.musa import mcc_version

        return Toolkit(root=root, compiler=mcc, version=mcc_version(out), found=True, source=source)

    def providers(self) -> tuple[Provider, ...]:
        from builder.providers.common import TOOLS
        from builder.providers.cpu import CPU_PROVIDERS
        from builder.providers.musa import MOORE_PROVIDERS

        return (*TOOLS, *CPU_PROVIDERS, *MOORE_PROVIDERS)

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else MUSA_DEFAULTS[0]
        return {"MUSA_ROOT": str(root), **host.hints}

    def environment(self, host: HostFacts) -> dict[str, str]:
        root = host.toolkit.root if host.toolkit else MUSA_DEFAULTS[0]
        return {"MUSA_ROOT": str(root), "MUSA_HOME": str(root)}

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str:
        if settings.local_version:
            return settings.local_version
        version = host.toolkit.version if host.toolkit else None
        return "musa" + "".join(version.split(".")[:2]) if version else "musa"


MOORE = Moore()
