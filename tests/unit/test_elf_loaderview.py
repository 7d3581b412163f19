"""The dynamic tables read as ld.so reads them (wheels.elf.loaderview): a section header table
overwritten with random bytes changes nothing the audit reads, and never the platform tag."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from tests.wheelmaker import make_wheel
from wheels.audit import audit_wheel
from wheels.elf import read_elf
from wheels.policy import load_vendor_policy

LIBS = [Path(d, "libz.so.1") for d in ("/lib/x86_64-linux-gnu", "/usr/lib64")]
LIBZ = next((p.resolve() for p in LIBS if p.exists()), None)
pytestmark = pytest.mark.skipif(LIBZ is None, reason="no libz.so.1 on this host")


def scrambled(data: bytes, seed: int) -> bytes:
    """``data`` (a 64-bit little-endian ELF) with its section header table overwritten."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count = struct.unpack_from("<HH", data, 0x3A)
    out = bytearray(data)
    out[shoff : shoff + entsize * count] = random.Random(seed).randbytes(entsize * count)
    return bytes(out)


@pytest.mark.parametrize("seed", range(4))
def test_a_random_section_table_changes_nothing_the_loader_reads(seed: int) -> None:
    assert LIBZ is not None
    intact = read_elf(LIBZ.read_bytes())
    broken = read_elf(scrambled(LIBZ.read_bytes(), seed))
    assert intact.version_needs and broken.version_needs == intact.version_needs
    assert broken.needed == intact.needed and broken.version_defs == intact.version_defs
    assert broken.undefined == intact.undefined
    assert broken.undefined_versions == intact.undefined_versions
    assert broken.exports == intact.exports


def test_the_tag_of_a_wheel_with_a_random_section_table_is_the_intact_ones(
    tmp_path: Path,
) -> None:
    assert LIBZ is not None
    cpu = load_vendor_policy("cpu")
    tag = "cp311-cp311-linux_x86_64"
    intact = make_wheel(tmp_path / "a", {"demo/libz.so.1": LIBZ.read_bytes()}, tag=tag)
    bad = scrambled(LIBZ.read_bytes(), 7)
    broken = make_wheel(tmp_path / "b", {"demo/libz.so.1": bad}, tag=tag)
    first, second = audit_wheel(intact, cpu), audit_wheel(broken, cpu)
    assert second.auditwheel_tag == first.auditwheel_tag != "manylinux_2_5_x86_64"
    assert second.tag == first.tag
    assert [f.code for f in second.violations] == [f.code for f in first.violations]
    assert [f.code for f in second.warnings if f.code != "section-table"] == [
        f.code for f in first.warnings
    ]
    assert not any("fat binary" in f.message for f in second.findings)
