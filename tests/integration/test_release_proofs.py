"""A release's proof of reproducibility stands for a later release of the same inputs: the mini
stack released again (every entry from the store, the same wheel bytes) starts no second build;
a record that is not this wheel's bytes proves nothing; ``--reverify`` builds the second time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_release_of_proven_inputs_is_not_built_twice_again(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    def release(out: str, *more: str):  # type: ignore[no-untyped-def]
        return cli("release", "--manifest", mini, "--vendor", "cpu", "-o", tmp_path / out, *more)

    first = release("a")
    assert first.code == 0, first.err
    (wheel,) = (tmp_path / "a").glob("*.whl")
    (proof,) = (home / "proofs").glob("*.json")
    recorded = json.loads(proof.read_text())
    assert recorded["wheel"] == wheel.name and recorded["sha256"] == sha256(wheel)

    again = release("b")
    assert again.code == 0, again.err
    assert "building again" not in again.err  # no second build, beside or after
    said = f"verify: {wheel.name}: the same bytes that release {recorded['run']} built twice"
    assert said in again.err
    verify = json.loads((tmp_path / "b" / "release-report.json").read_text())["steps"]["verify"]
    assert verify["proven_by"] == {wheel.name: recorded["run"]} and not verify["beside"]
    assert sha256(tmp_path / "b" / wheel.name) == sha256(wheel)
    assert f"ok (proven by release {recorded['run']})" in cli("report").out

    # A record of other bytes proves nothing: built a second time after the check, recorded anew.
    proof.write_text(json.dumps({**recorded, "sha256": "0" * 64}))
    third = release("c")
    assert third.code == 0, third.err
    assert f"verify: {wheel.name}: two builds are byte-identical" in third.err
    assert json.loads(proof.read_text())["sha256"] == recorded["sha256"]

    # --reverify: the second build starts beside the first, as in a release without a record.
    fourth = release("d", "--reverify")
    assert fourth.code == 0, fourth.err
    assert "beside the first build" in fourth.err
    verify = json.loads((tmp_path / "d" / "release-report.json").read_text())["steps"]["verify"]
    assert verify["proven_by"] == {} and verify["beside"]
