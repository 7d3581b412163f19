"""The proof records a release keeps: keyed by every component's key, read back, and holding
only for the very bytes they were made from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from builder.core.layout import Layout
from builder.pipeline import proofs
from tests.planning import plan_for


def test_a_proof_holds_for_the_same_inputs_and_bytes_only(tmp_path: Path) -> None:
    layout = Layout(home=tmp_path / "home", store_root=tmp_path / "home" / "store")
    plan = plan_for("cpu")
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    wheel.write_bytes(b"first")
    assert proofs.find(layout, plan) is None
    made = proofs.record(layout, plan, wheel, "20261207-120000-cpu-1")
    assert proofs.find(layout, plan) == made and proofs.holds(made, wheel)
    # Other inputs (one key changed) have no proof; other bytes or another name are not proven.
    changed = dataclasses.replace(
        plan, components=(dataclasses.replace(plan.components[0], key="0" * 32),)
    )
    assert proofs.find(layout, changed) is None
    wheel.write_bytes(b"other")
    assert not proofs.holds(made, wheel)
    assert not proofs.holds(dataclasses.replace(made, wheel="x.whl"), wheel)
    # An unreadable record costs a second build, never a traceback.
    proofs.proof_path(layout, plan).write_text("{not json")
    assert proofs.find(layout, plan) is None
