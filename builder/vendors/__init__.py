"""Vendor plugins behind one Protocol, and the registry that maps names and aliases to them.

A vendor is its plugin module here (``builder/vendors/<name>.py``, exporting ``PLUGIN``: its
provider table, toolkit places, CMake switches, wheel local version, device command) and its
data entry in ``wheels/policy/vendors.json`` (aliases, local-version pattern, what its wheels
may take from the machine or other distributions). The registry lists the vendors the data
names; adding one touches its module and its data entry.
"""

from __future__ import annotations

import difflib
import importlib

from builder.core.errors import UsageError
from builder.core.host import HostFacts
from builder.vendors.base import Vendor
from wheels import policy


def _plugin(name: str) -> Vendor:
    plugin: Vendor = importlib.import_module(f"builder.vendors.{name}").PLUGIN
    assert plugin.name == name, f"builder/vendors/{name}.py is the plugin of {plugin.name}"
    return plugin


REGISTRY: dict[str, Vendor] = {name: _plugin(name) for name in policy.vendor_names()}
ALIASES: dict[str, str] = {
    alias: name for name in REGISTRY for alias in policy.load_vendor_policy(name).aliases
}


def canonical_name(name: str) -> str:
    """``ali`` -> ``thead``; raises UsageError with a suggestion for an unknown name."""
    found = policy.canonical_vendor(name)
    if found is not None:
        return found
    known = sorted([*REGISTRY, *ALIASES])
    close = difflib.get_close_matches(name.strip().lower(), known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known vendors: {', '.join(known)}"
    raise UsageError(f"unknown vendor '{name}'", hint=hint)


def get(name: str) -> Vendor:
    return REGISTRY[canonical_name(name)]


def is_known(name: str) -> bool:
    return policy.canonical_vendor(name) is not None


__all__ = ["ALIASES", "REGISTRY", "HostFacts", "Vendor", "canonical_name", "get", "is_known"]
