"""The audit command's exit codes: 2 for a path that is not a wheel file, 1 for the audit's own
failure (never reported as a violation), 6 for a violation, 0 for a clean wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.wheelmaker import Breakage, make_wheel
from wheels.audit import audit_wheel
from wheels.policy import load_vendor_policy

PURE = {"demo/__init__.py": b"VALUE = 1\n"}


def test_a_missing_path_is_a_usage_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result: CliResult = cli("audit", "--no-cache", tmp_path / "gone.whl")
    assert result.code == 2 and "gone.whl: no such file" in result.err


def test_a_directory_is_a_usage_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("audit", "--no-cache", tmp_path).code == 2


def test_clean_and_violating_wheels_exit_0_and_6(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clean = make_wheel(tmp_path / "a", PURE)
    bad = make_wheel(tmp_path / "b", PURE, breakage=Breakage(tamper_record="demo/__init__.py"))
    assert cli("audit", "--no-cache", clean).code == 0
    assert cli("audit", "--no-cache", bad).code == 6


def _broken(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug in the audit")


def test_an_internal_error_is_exit_1_and_no_violation(
    cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    wheel = make_wheel(tmp_path, PURE)
    monkeypatch.setattr("wheels.audit.core.check_record", _broken)
    audit = audit_wheel(wheel, load_vendor_policy("cpu"))
    assert not audit.ok and audit.violations == ()
    assert [f.code for f in audit.errors] == ["internal"]
    assert "internal error" in audit.errors[0].message
    result: CliResult = cli("audit", "--no-cache", wheel)
    assert result.code == 1 and "internal error" in result.err
    assert "INTERNAL ERROR" in result.out and "violation" not in result.out
