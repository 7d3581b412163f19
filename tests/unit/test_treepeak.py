"""benchmarks/treepeak.py sums what a command's processes hold at once, a forked child's too."""

from __future__ import annotations

import sys

from benchmarks.treepeak import run

# Parent and child each fill 64 MB of their own, then wait for each other: held at once.
FORKED = """
import os, time
r, w = os.pipe()
pid = os.fork()
block = bytearray(64 << 20)
block[::4096] = b"x" * len(block[::4096])
if pid == 0:
    os.write(w, b"1")
    time.sleep(0.5)
    os._exit(0)
os.read(r, 1)
time.sleep(0.5)
os.waitpid(pid, 0)
"""


def test_the_peak_of_a_forking_command_is_summed_over_its_processes() -> None:
    code, peak = run([sys.executable, "-c", FORKED])
    assert code == 0
    assert peak.largest >= 64 << 10
    assert peak.rss >= 128 << 10 > peak.largest  # both blocks at once: more than either
    assert peak.pss >= 128 << 10
    assert peak.seconds >= 0.5
