"""The audit's memory is bounded by what it keeps of a member, not by the member's size: a
128 MB member is streamed in steps (wheels.audit.raw.RawFile) and kept only where it is read
(wheels.audit.sparse), in this process or in a child. Peak RSS is measured in a subprocess
(``resource.getrusage``, the largest of its processes) against the same audit of a small wheel."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.wheelmaker import make_wheel

BIG = 128 << 20
AUDIT = """
import json, sys
from pathlib import Path
from wheels.audit import audit_wheel
from wheels.audit import pool
from wheels.policy import load_vendor_policy
pool.REST_ALONE = 0  # (else this wheel, one big member and little else, is read without a child)
audit = audit_wheel(Path(sys.argv[1]), load_vendor_policy("cpu"), workers=int(sys.argv[2]))
print(json.dumps(sorted({f.code for f in audit.findings})))
"""
# The audit runs as the child of a small process that reads its peak: a process's peak RSS
# starts at that of the process it was forked from (here pytest's, which made the wheels).
PEAK = """
import json, resource, subprocess, sys
done = subprocess.run([sys.executable, "-c", *sys.argv[1:]], capture_output=True, check=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss << 10
print(json.dumps({"peak": peak, "codes": json.loads(done.stdout)}))
"""


def peak(wheel: Path, workers: int) -> dict[str, object]:
    """The largest RSS of the audit's processes, and the codes of its findings."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK, AUDIT, str(wheel), str(workers)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout)
    return result


def filler(size: int) -> bytes:
    """Bytes that deflate about 2:1, so that the wheel is big enough to be read by a child
    started early (wheels.audit.pool.EARLY_ABOVE): 4 random bits a byte, 16 MB repeated."""
    block = random.Random(0).randbytes(16 << 20).translate(bytes(i & 15 for i in range(256)))
    return (block * (size // len(block) + 1))[:size]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("memory")
    small = make_wheel(root / "small", {"demo/__init__.py": b"", "demo/data.bin": filler(1 << 20)})
    big = make_wheel(
        root / "big",
        {"demo/__init__.py": b"", "demo/libbig.so": filler(BIG)},
    )
    return small, big


@pytest.mark.parametrize("workers", [1, 2], ids=["here", "in-a-child"])
def test_peak_memory_stays_far_below_a_big_members_size(
    wheels: tuple[Path, Path], workers: int
) -> None:
    small, big = wheels
    base = peak(small, workers)
    found = peak(big, workers)
    assert found["codes"] == ["not-elf"]  # libbig.so is read (its head), and is no ELF file
    grown = int(found["peak"]) - int(base["peak"])  # type: ignore[call-overload]
    assert grown < BIG // 4, f"peak RSS grew {grown >> 20} MB for a member of {BIG >> 20} MB"


@pytest.mark.slow
def test_the_summed_peak_of_the_audits_processes_on_a_4_gib_bomb_stays_under_300_mb(
    tmp_path: Path,
) -> None:
    """A 4 MB wheel whose one member inflates to 4 GiB of zeros, audited by the CLI with the
    default worker count: the RSS of every process of its tree, sampled from /proc and summed
    (benchmarks/treepeak.py), stays at most 300 MB (1.19 GB before its saved inflater states
    let go of the input they had left)."""
    from benchmarks.treepeak import run
    from tests.wheelmaker import zero_bomb

    wheel = zero_bomb(tmp_path / "bomb")
    argv = [sys.executable, "-m", "builder", "audit", "--no-cache", str(wheel)]
    env_home = tmp_path / "home"
    code, peak = run(["env", f"INFINI_STACK_HOME={env_home}", *argv])
    assert code == 0
    assert peak.rss <= 300 << 10, f"summed peak RSS {peak.rss >> 10} MB"
