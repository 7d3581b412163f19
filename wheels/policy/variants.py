"""A vendor's PEP 825 variant data, its ``variant`` entry in vendors.json.

``namespace`` is the variant namespace of the vendor's properties; ``toolkit`` and ``arch`` name
the features that carry the toolkit's version (a lower bound: the runtime the wheel was built
against) and the device architectures; ``arch_from`` says where the architectures are read:
``cuda-fatbin`` (the SASS and PTX in the ELF files' fat binaries), ``cuda_architectures`` (what
stack.yaml gives the vendor's compiler) or ``none``. ``provider`` is the provider information
(PEP 850) every variant wheel of the stack carries for the namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping


ArchSource = Literal["cuda-fatbin", "cuda_architectures", "none"]

ARCH_SOURCES: tuple[ArchSource, ...] = ("cuda-fatbin", "cuda_architectures", "none")
_NAME = re.compile(r"^[a-z0-9_]+$")  # PEP 825


def is_name(text: str) -> bool:
    """Is ``text`` a PEP 825 namespace or feature name?"""
    return _NAME.match(text) is not None


PROVIDER_KEYS = ("requires", "plugin-api", "optional", "static-properties", "feature-order")
KEYS = ("namespace", "toolkit", "arch", "arch_from", "provider")


@dataclass(frozen=True)
class VariantPolicy:
    namespace: str
    toolkit: str  # feature name: the toolkit version the wheel was built with, as a lower bound
    arch: str  # feature name: the device architectures the wheel carries code for
    arch_from: ArchSource
    provider: Mapping[str, Any]  # PEP 850 provider information, as written into variant.json


def parse_variant(where: str, raw: Any, problems: list[str]) -> VariantPolicy | None:
    """The ``variant`` entry of one vendor; problems are appended, None when unusable."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected an object")
        return None
    problems += [f"{where}: unknown key '{k}'" for k in raw if k not in KEYS]
    names = [raw.get(k) for k in ("namespace", "toolkit", "arch")]
    if not all(isinstance(n, str) and is_name(n) for n in names):
        problems.append(f"{where}: namespace, toolkit and arch must match [a-z0-9_]+")
        return None
    arch_from = raw.get("arch_from", "none")
    if arch_from not in ARCH_SOURCES:
        problems.append(f"{where}.arch_from: one of {', '.join(ARCH_SOURCES)}")
        return None
    provider = raw.get("provider")
    if not isinstance(provider, dict) or not _provider_ok(f"{where}.provider", provider, problems):
        return None
    namespace, toolkit, arch = (str(n) for n in names)
    return VariantPolicy(namespace, toolkit, arch, arch_from, MappingProxyType(dict(provider)))


def _provider_ok(where: str, provider: Mapping[str, Any], problems: list[str]) -> bool:
    before = len(problems)
    problems += [f"{where}: unknown key '{k}'" for k in provider if k not in PROVIDER_KEYS]
    kinds = [k for k in ("requires", "static-properties") if k in provider]
    if len(kinds) != 1:
        problems.append(f"{where}: exactly one of 'requires' and 'static-properties'")
    static = provider.get("static-properties", {})
    if not isinstance(static, dict) or not all(
        is_name(f) and isinstance(v, list) and v for f, v in static.items()
    ):
        problems.append(f"{where}.static-properties: feature -> non-empty list of values")
    elif len(static) > 1 and sorted(provider.get("feature-order", [])) != sorted(static):
        problems.append(f"{where}.feature-order: must order every static feature")
    return len(problems) == before
