"""The size budget: the audit's size report (wheel, largest members) in text and JSON, and the
wheel-size finding against --max-size / wheel.max_size or PyPI's default limit."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path

import pytest

from tests.wheelmaker import make_wheel
from wheels.audit import audit_wheel
from wheels.audit_report import render_text, to_json
from wheels.policy import load_vendor_policy
from wheels.sizes import PYPI_MAX_SIZE, human_size, parse_size

CPU = load_vendor_policy("cpu")


def sized_wheel(directory: Path, sizes: dict[str, int]) -> Path:
    """A wheel whose members are incompressible random bytes of the given sizes."""
    files = {f"demo/{name}": os.urandom(size) for name, size in sizes.items()}
    return make_wheel(directory, {"demo/__init__.py": b"", **files})


def stored_wheel(directory: Path, size: int) -> Path:
    """A wheel holding one member of ``size`` zero bytes, stored (not deflated): a file of that
    size on disk, written in a moment."""
    data = bytes(size)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    meta = b"Metadata-Version: 2.1\nName: big\nVersion: 1.0+cpu\n"
    wheel = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members = {"big/data.bin": data, "big-1.0+cpu.dist-info/METADATA": meta}
    members["big-1.0+cpu.dist-info/WHEEL"] = wheel
    record = [f"big/data.bin,sha256={digest},{size}"]
    for name in list(members)[1:]:
        sha = hashlib.sha256(members[name]).digest()
        code = base64.urlsafe_b64encode(sha).rstrip(b"=").decode()
        record.append(f"{name},sha256={code},{len(members[name])}")
    record.append("big-1.0+cpu.dist-info/RECORD,,")
    members["big-1.0+cpu.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    path = directory / "big-1.0+cpu-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, content in members.items():
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), content)
    return path


def test_the_report_gives_the_wheel_size_and_its_largest_members_in_text_and_json(
    tmp_path: Path,
) -> None:
    wheel = sized_wheel(tmp_path, {"a.bin": 300_000, "b.bin": 20_000, "c.bin": 100_000})
    result = audit_wheel(wheel, CPU, workers=1)
    assert result.ok and result.size is not None
    assert result.size.wheel_bytes == wheel.stat().st_size
    assert [m.member for m in result.size.largest[:3]] == ["demo/a.bin", "demo/c.bin", "demo/b.bin"]
    assert result.size.largest[0].unpacked == 300_000
    assert result.size.limit == PYPI_MAX_SIZE and "wheel-size" not in {
        f.code for f in result.findings
    }
    text = render_text([result])
    assert f"size: {wheel.stat().st_size / 1e3:.1f} kB" in text and "limit 100.0 MB" in text
    assert re.search(r"largest members: demo/a\.bin 30\d\.\d kB \(300\.0 kB\), demo/c", text)
    size = to_json([result])["wheels"][0]["size"]
    assert size["bytes"] == wheel.stat().st_size and size["limit"] == PYPI_MAX_SIZE
    assert size["largest"][0] == {
        "member": "demo/a.bin",
        "bytes": size["largest"][0]["bytes"],
        "unpacked": 300_000,
    }
    assert size["device"] == []
    json.dumps(size)


def test_a_wheel_over_max_size_is_a_violation_naming_its_largest_member(tmp_path: Path) -> None:
    wheel = sized_wheel(tmp_path, {"a.bin": 200_000})
    result = audit_wheel(wheel, CPU, workers=1, max_size=100_000)
    (finding,) = [f for f in result.violations if f.code == "wheel-size"]
    assert "over 100.0 kB (wheel.max_size / --max-size)" in finding.message
    assert "demo/a.bin" in finding.message
    assert audit_wheel(wheel, CPU, workers=1, max_size=wheel.stat().st_size).ok


def test_without_a_limit_a_wheel_over_pypis_100_mb_is_a_warning(tmp_path: Path) -> None:
    wheel = stored_wheel(tmp_path, PYPI_MAX_SIZE + 1)
    result = audit_wheel(wheel, CPU, workers=1)
    assert result.ok  # a warning, not a violation
    (finding,) = [f for f in result.warnings if f.code == "wheel-size"]
    assert "PyPI's default upload limit" in finding.message
    assert "big/data.bin" in finding.message


def test_the_audit_command_takes_max_size(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    wheel = sized_wheel(tmp_path, {"a.bin": 50_000})
    assert cli("audit", "--no-cache", "--max-size", "10KB", wheel).code == 6
    assert cli("audit", "--no-cache", "--max-size", "1MiB", wheel).code == 0
    with pytest.raises(SystemExit) as exc:
        cli("audit", "--no-cache", "--max-size", "lots", wheel)
    assert exc.value.code == 2
    assert "--max-size: not a size: 'lots'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "size"), [("1234", 1234), ("10KB", 10_000), ("1.5 GB", 1_500_000_000), ("2KiB", 2048)]
)
def test_sizes_read_as_stack_yaml_and_the_command_line_write_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("count", "text"), [(999, "999 bytes"), (1000, "1.0 kB"), (100_000_001, "100.0 MB")]
)
def test_sizes_are_shown_in_decimal_units(count: int, text: str) -> None:
    assert human_size(count) == text
