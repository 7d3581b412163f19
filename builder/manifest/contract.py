"""The version contract: the superproject (InfiniCore) whose gitlinks say which revisions of the
components go together, as ``infini-stack lock --from infinicore=REV`` recorded it.

    contract:
      infinicore:
        git: https://github.com/InfiniTensor/InfiniCore.git
        rev: <40-hex SHA>
        pins: {infinirt: <SHA>, infiniops: <SHA>, infiniccl: <SHA>}   # its gitlinks at rev

A pin that differs from the contract's gitlink (a component's default or a vendor override) is a
departure; it must say why with ``reason:`` beside its ``rev:``. Loading the manifest (``validate``
and every command) refuses an undeclared departure; ``plan`` prints the reasons;
``lock --check --strict`` also holds the recorded gitlinks to the superproject's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from builder.manifest.model import Component, Contract, GitSource, Source
from builder.manifest.schema import Key, Reader

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
CONTRACT_KEYS = ("git", "rev", "pins")


@dataclass(frozen=True, kw_only=True)
class Departure:
    component: str
    vendor: str | None  # None: the component's default pin
    rev: str
    contract_rev: str
    reason: str | None

    @property
    def key(self) -> Key:
        base: Key = ("components", self.component)
        return (*base, "vendors", self.vendor, "rev") if self.vendor else (*base, "rev")

    @property
    def where(self) -> str:
        return f"{self.component} for {self.vendor}" if self.vendor else self.component


def read_contract(r: Reader) -> Contract | None:
    """stack.yaml's ``contract:`` (one superproject), checked for shape."""
    entries = r.mapping(("contract",))
    if len(entries) > 1:
        r.error(("contract",), "a contract names one superproject")
    for name in entries:
        key: Key = ("contract", name)
        r.mapping(key)
        r.check_keys(key, CONTRACT_KEYS)
        url = r.string((*key, "git"), required=True) or ""
        rev = r.string((*key, "rev"), required=True) or ""
        if rev and not SHA_RE.match(rev):
            r.error((*key, "rev"), f"the contract's rev must be a full 40-hex SHA, not '{rev}'")
        pins: dict[str, str] = {}
        for component, sha in r.mapping((*key, "pins")).items():
            text = r.string((*key, "pins", component)) or ""
            if not SHA_RE.match(text):
                r.error((*key, "pins", component), f"a gitlink must be a full SHA, not '{sha}'")
            pins[component] = text
        return Contract(name=name, url=url, rev=rev, pins=pins)
    return None


def departures(contract: Contract | None, components: Mapping[str, Component]) -> list[Departure]:
    """Every git pin of a component the contract names that differs from its gitlink."""
    if contract is None:
        return []
    out: list[Departure] = []
    for name, gitlink in contract.pins.items():
        component = components.get(name)
        if component is None:
            continue
        pins: list[tuple[str | None, Source | None, str | None]]
        pins = [(None, component.source, component.reason)]
        pins += [(v, o.source, o.reason) for v, o in component.overrides.items()]
        out += [
            Departure(
                component=name, vendor=vendor, rev=source.rev, contract_rev=gitlink, reason=reason
            )
            for vendor, source, reason in pins
            if isinstance(source, GitSource) and source.rev != gitlink
        ]
    return out


def undeclared_message(contract: Contract, departure: Departure) -> str:
    return (
        f"{departure.where} is pinned at {departure.rev[:12]}, not at {contract.name} "
        f"{contract.rev[:12]}'s gitlink {departure.contract_rev[:12]}: say why with `reason:` "
        "beside its rev (or pin the contract's revision)"
    )


def check_reasons(
    r: Reader, contract: Contract | None, components: Mapping[str, Component]
) -> None:
    """Each departure without a ``reason:`` is a problem at its ``rev:``."""
    for departure in departures(contract, components):
        if not departure.reason and contract is not None:
            r.error(departure.key, undeclared_message(contract, departure))
