"""Running a sanitized wheel's code: its profile (from ``--sanitize`` or the wheel's local
version, ``+cpu.asan``) and the environment of the interpreter that loads it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from builder.core import proc
from builder.core.sanitize import Profile, Suppression, parse, run_env, suppression_files

# Vendors whose wheels load a CUDA driver (the PPU SDK's is CUDA's shape): ASan must leave the
# shadow gap unprotected for it.
CUDA_VENDORS = ("nvidia", "thead")


def wheel_profile(wheel: Path, given: str | None = None) -> Profile | None:
    """``given`` (``--sanitize``; ``none`` for none), else the profile the wheel's name says."""
    from wheels.naming import sanitizer_of_wheel

    return parse(given if given is not None else sanitizer_of_wheel(wheel.name))


def compiler(env: Mapping[str, str]) -> str:
    """The C++ compiler whose runtime is preloaded: ``$CXX``, else ``c++``, the one a build
    here uses (builder.core.host)."""
    name = env.get("CXX") or "c++"
    return proc.which(name, env.get("PATH")) or name


def python_env(
    profile: Profile | None,
    vendor: str | None,
    base: Mapping[str, str] | None = None,
    *,
    suppressions: tuple[Suppression, ...] = (),
    work: Path | None = None,
) -> dict[str, str]:
    """``base`` (the environment) for a Python interpreter that loads ``profile``'s code, with
    ``suppressions`` written as the sanitizers' files under ``work``."""
    base = dict(os.environ if base is None else base)
    files = suppression_files(profile, suppressions, work) if profile and work else {}
    cuda = vendor in CUDA_VENDORS
    return run_env(profile, compiler(base), base, cuda=cuda, suppressions=files)
