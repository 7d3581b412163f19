"""The size budget on the wheel command: --max-size, and stack.yaml's wheel.max_size, make an
oversized wheel fail its audit (exit 6), kept aside, never written to --out."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_an_oversized_wheel_fails_by_max_size_and_by_wheel_max_size(
    home: Path,
    mini: Path,
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "d"
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out, "--max-size", "1KB")
    assert result.code == 6, result.err
    assert (
        "[wheel-size]" in result.err and "over 1.0 kB (wheel.max_size / --max-size)" in result.err
    )
    assert not list(out.glob("*.whl"))
    assert list((home / "wheels" / "rejected").glob("*.whl"))
    mini.write_text(mini.read_text() + "  max_size: 1KB\n")
    assert cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out).code == 6
    passed = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", out, "--max-size", "50MB")
    assert passed.code == 0, passed.err
    assert len(list(out.glob("*.whl"))) == 1
