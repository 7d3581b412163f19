"""``source: NAME`` in stack.yaml: a component built from another component's checkout.

InfiniLM's runtime (libinfinicore_runtime.so), which no interpreter changes, and its extension
modules, built once per interpreter, are two components of one repository. The runtime's entry
names the extensions' pin instead of repeating it: one ``lock`` moves both, and the two can never
be built from two revisions. The borrower takes the lender's source and each vendor's own pin
(with its reason); its own ``vendors.V`` may add options, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping

from builder.manifest.model import Component, Source, VendorOverride
from builder.manifest.schema import Key, Reader, unknown_message

PIN_KEYS = ("git", "rev", "path", "reason")


def lender_name(r: Reader, key: Key) -> str | None:
    """The component ``source:`` names, where the entry at ``key`` has one."""
    return r.string((*key, "source")) if r.has((*key, "source")) else None


def refuse_own_pins(r: Reader, key: Key, lender: str) -> None:
    """A borrower pins nothing itself: each pin it carries is an error naming the lender."""
    for where in (key, *((*key, "vendors", v) for v in r.mapping((*key, "vendors")))):
        for pin in PIN_KEYS:
            if r.has((*where, pin)):
                r.error(
                    (*where, pin),
                    f"'{pin}' is not for a component with 'source: {lender}': it builds "
                    f"{lender}'s checkout, so pin {lender} instead",
                    on_key=True,
                )


def borrowed_source(
    r: Reader, key: Key, lender: str, read: Mapping[str, Component]
) -> tuple[Source, dict[str, VendorOverride]] | None:
    """The lender's source and its vendors' own pins, or None (an error said why)."""
    found = read.get(lender)
    if found is None or found.borrows is not None:
        known = [n for n, c in read.items() if c.borrows is None]
        why = (
            f"{lender} takes its source from {found.borrows}: name a component with a pin"
            if found is not None
            else unknown_message("component", lender, known)
        )
        r.error((*key, "source"), why)
        return None
    pins = {
        vendor: VendorOverride(source=o.source, options={}, reason=o.reason)
        for vendor, o in found.overrides.items()
        if o.source is not None
    }
    return found.source, pins


def with_own_options(
    pins: Mapping[str, VendorOverride], options: Mapping[str, Mapping[str, str]]
) -> dict[str, VendorOverride]:
    """The lender's vendor pins, each with the borrower's own options for that vendor."""
    out = dict(pins)
    for vendor, own in options.items():
        pin = out.get(vendor)
        out[vendor] = VendorOverride(
            source=pin.source if pin else None, options=own, reason=pin.reason if pin else None
        )
    return out
