"""What every vendor plugin provides, and the host facts planning depends on."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from builder import proc

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

    def detect_toolkit(self, env: Mapping[str, str]) -> Toolkit | None: ...

    def providers(self) -> tuple[Provider, ...]:
        """What the host must provide for this vendor (see builder.providers)."""
        ...

    def cmake_defines(self, host: HostFacts, settings: VendorSettings) -> dict[str, str]: ...

    def environment(self, host: HostFacts) -> dict[str, str]: ...

    def local_version(self, host: HostFacts, settings: VendorSettings) -> str: ...


def locate_root(
    env: Mapping[str, str],
    env_vars: Sequence[str],
    defaults: Sequence[str],
    compiler: str,
    *,
    derived: Mapping[str, str] | None = None,
) -> tuple[Path, str] | None:
    """First existing toolkit root in upstream's order: env vars, derived env paths, defaults, PATH.

    ``derived`` maps an env var to a sub path (``PPU_SDK_ROOT`` -> ``CUDA_SDK``).
    """
    for var in env_vars:
        value = env.get(var)
        if value and Path(value).is_dir():
            return Path(value), var
    for var, sub in (derived or {}).items():
        value = env.get(var)
        if value and (Path(value) / sub).is_dir():
            return Path(value) / sub, f"${var}/{sub}"
    for default in defaults:
        if Path(default).is_dir():
            return Path(default), "default path"
    on_path = proc.which(compiler, env.get("PATH", os.defpath))
    if on_path:
        return Path(on_path).resolve().parent.parent, "PATH"
    return None


_NVCC_RELEASE = re.compile(r"release (\d+\.\d+)")


def nvcc_version(nvcc: Path) -> str | None:
    """``release 13.0`` from ``nvcc --version``; None when it does not run or say so."""
    try:
        out = proc.capture([str(nvcc), "--version"], check=False, timeout=30)
    except Exception:
        return None
    match = _NVCC_RELEASE.search(out)
    return match.group(1) if match else None


def cuda_like_toolkit(
    env: Mapping[str, str],
    env_vars: Sequence[str],
    defaults: Sequence[str],
    *,
    derived: Mapping[str, str] | None = None,
) -> Toolkit | None:
    located = locate_root(env, env_vars, defaults, "nvcc", derived=derived)
    if located is None:
        return None
    root, source = located
    nvcc = root / "bin" / "nvcc"
    if not nvcc.exists():
        return Toolkit(root=root, compiler=None, version=None, found=False, source=source)
    return Toolkit(root=root, compiler=nvcc, version=nvcc_version(nvcc), found=True, source=source)
