"""The peak memory of a command's whole process tree, sampled from ``/proc``.

    python benchmarks/treepeak.py [--interval 0.01] -- COMMAND [ARG ...]

``ru_maxrss`` gives the largest single process, never what a forking program holds at once. This
starts the command, and every ``--interval`` seconds reads every live descendant's resident set
(``/proc/PID/statm``: RSS), summing it over the tree, and at each new peak of that sum the
proportional sets too (``/proc/PID/smaps_rollup``: PSS, each shared page divided among the
processes mapping it); the peak of each sum is kept. The RSS sum counts a page a forked child
shares with its parent twice, so it is the upper figure; the PSS sum (at the RSS sum's peaks)
counts it once. The last line on stderr is
``@@TREEPEAK@@ SECONDS RSS_KB PSS_KB MAX_ONE_KB CPU_SECONDS`` (the CPU time, user and system, of
every process of the tree: on a loaded machine a steadier measure of work than the wall time);
the command's exit status is passed on.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
MARK = "@@TREEPEAK@@"


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of the tree, in kB."""

    rss: int
    pss: int
    largest: int


@dataclass(frozen=True, slots=True)
class Peak:
    """What a run held at most, in kB, and how long it took."""

    seconds: float
    rss: int
    pss: int
    largest: int
    cpu: float = 0.0

    def line(self) -> str:
        return f"{MARK} {self.seconds:.4f} {self.rss} {self.pss} {self.largest} {self.cpu:.4f}"


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's list)."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text(encoding="ascii").split()]
    except OSError:  # the process ended while it was read
        pass
    return found


def tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += children(pid)
    return pids


def rss_kb(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text(encoding="ascii").split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def pss_kb(pid: int) -> int:
    try:
        with Path(f"/proc/{pid}/smaps_rollup").open(encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def sample(root: int, pss_above: int = -1) -> Sample:
    """The tree's RSS now; its PSS too when the RSS sum is over ``pss_above`` (reading PSS
    walks each process's page tables, which costs the command a share of a core at 10 ms)."""
    pids = tree(root)
    rss = [rss_kb(p) for p in pids]
    pss = sum(pss_kb(p) for p in pids) if sum(rss) > pss_above else 0
    return Sample(sum(rss), pss, max(rss, default=0))


def run(argv: Sequence[str], interval: float = 0.01) -> tuple[int, Peak]:
    """Run ``argv`` to its end, sampling its tree; its exit status and the peaks. Its time is
    taken by a thread that waits for it, not by the sampling loop."""
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen(list(argv))
    ended: list[float] = []
    done = threading.Event()

    def wait() -> None:
        proc.wait()
        ended.append(time.perf_counter())
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    rss = pss = largest = 0
    while not done.is_set():
        s = sample(proc.pid, pss_above=rss)
        rss, pss, largest = max(rss, s.rss), max(pss, s.pss), max(largest, s.largest)
        done.wait(interval)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc.returncode, Peak(ended[0] - start, rss, pss, largest, used.ru_utime + used.ru_stime)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command is needed")
    code, peak = run(command, args.interval)
    print(peak.line(), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
