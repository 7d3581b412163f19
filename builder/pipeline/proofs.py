"""Proofs of reproducibility, kept for later releases of the same inputs.

A release proves its wheel reproducible by building it a second time under a fresh home and
comparing the bytes. What that proves is about the inputs: the components' keys (sources,
recipes, options, toolchain, host) and the vendor. A later release whose plan has the same keys
and whose wheel comes out as the same bytes (its SHA-256) is proven by that earlier second
build: it starts no second build of its own. A wheel whose bytes differ from the record's is
built a second time, as a release without a record is, and its proof replaces the old one.
``release --reverify`` builds the second time anyway.

A record is ``<home>/proofs/<inputs>.json``, written once the second build agreed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core.fs import atomic_write
from builder.pipeline.release_dir import sha256_file

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from builder.core.layout import Layout
    from builder.pipeline.targets import Target
    from builder.plan import Plan


@dataclass(frozen=True, kw_only=True)
class Proof:
    """A wheel that two builds of the same inputs made byte for byte."""

    wheel: str  # its file name
    sha256: str
    run: str  # the release whose second build agreed
    at: str  # when, UTC


def inputs_id(plan: Plan) -> str:
    """What a proof is about: the vendor and every component's key."""
    keys = sorted((c.name, c.key) for c in plan.components)
    blob = json.dumps({"vendor": plan.vendor, "keys": keys}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def proof_path(layout: Layout, plan: Plan) -> Path:
    return layout.home / "proofs" / f"{inputs_id(plan)}.json"


def find(layout: Layout, plan: Plan) -> Proof | None:
    """The proof recorded for ``plan``'s inputs; None when there is none (or it is unreadable,
    which only costs a second build)."""
    try:
        data = json.loads(proof_path(layout, plan).read_text(encoding="utf-8"))
        return Proof(**{name: str(data[name]) for name in ("wheel", "sha256", "run", "at")})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_each(
    targets: Sequence[Target], plans: Mapping[str, Plan], *, look: bool
) -> dict[str, Proof | None]:
    """Each interpreter's proof (by its tag) from an earlier release of the same inputs; none
    looked for unless ``look``."""
    return {t.tag: find(t.ctx.layout, plans[t.tag]) if look else None for t in targets}


def holds(proof: Proof | None, wheel: Path) -> bool:
    """Whether ``wheel`` is the very file ``proof`` proved: same name, same bytes."""
    return proof is not None and proof.wheel == wheel.name and sha256_file(wheel) == proof.sha256


def standing(proof: Proof | None, wheel: Path) -> str | None:
    """The release whose proof ``wheel`` is (these bytes, from these inputs), said on stderr;
    None when there is none."""
    if proof is None or not holds(proof, wheel):
        return None
    print(
        f"verify: {wheel.name}: the same bytes that release {proof.run} built twice "
        f"({proof.at}): not built again (--reverify builds it again)",
        file=sys.stderr,
    )
    return proof.run


def record(layout: Layout, plan: Plan, wheel: Path, run: str) -> Proof:
    """Keep the proof that ``wheel``, built from ``plan``, is reproducible."""
    proof = Proof(
        wheel=wheel.name,
        sha256=sha256_file(wheel),
        run=run,
        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    atomic_write(proof_path(layout, plan), json.dumps(asdict(proof), indent=2) + "\n")
    return proof
