"""Vendor plugins behind one Protocol, and the registry that maps names and aliases to them."""

from __future__ import annotations

import difflib

from builder.core.errors import UsageError
from builder.core.host import HostFacts
from builder.vendors.base import Vendor
from builder.vendors.cpu import CPU
from builder.vendors.moore import MOORE
from builder.vendors.nvidia import NVIDIA
from builder.vendors.thead import THEAD

_PLUGINS: tuple[Vendor, ...] = (CPU, NVIDIA, MOORE, THEAD)
REGISTRY: dict[str, Vendor] = {v.name: v for v in _PLUGINS}
ALIASES: dict[str, str] = {alias: v.name for v in REGISTRY.values() for alias in v.aliases}


def canonical_name(name: str) -> str:
    """``ali`` -> ``thead``; raises UsageError with a suggestion for an unknown name."""
    key = name.strip().lower()
    if key in REGISTRY:
        return key
    if key in ALIASES:
        return ALIASES[key]
    known = sorted([*REGISTRY, *ALIASES])
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known vendors: {', '.join(known)}"
    raise UsageError(f"unknown vendor '{name}'", hint=hint)


def get(name: str) -> Vendor:
    return REGISTRY[canonical_name(name)]


def is_known(name: str) -> bool:
    key = name.strip().lower()
    return key in REGISTRY or key in ALIASES


__all__ = ["ALIASES", "REGISTRY", "HostFacts", "Vendor", "canonical_name", "get", "is_known"]
