"""The runtime check's children one at a time against side by side, in one run.

    python benchmarks/check_pool.py [--runs 3] [--children 12] [--jobs N] [--import torch]

A stand-in check (``components/checks/children.py``, as the real checks use it): ``--children``
cases, each a child process that imports ``--import`` (the real checks' children spend most of
their time importing torch and InfiniLM) and does a moment's work. Timed with
``INFINI_STACK_CHECK_JOBS=1`` and ``=N`` (default: the cores), interleaved; the medians and their
ratio are printed with the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKS = Path(__file__).resolve().parents[1] / "components" / "checks"
SCRIPT = """\
import json, sys
from functools import partial
sys.path.insert(0, {checks!r})
import children

def case(spec, result):
    __import__({module!r})
    result({{"holds": True}})

def check(name):
    got = children.run_child(__file__, "case", {{"case": name}}, timeout=600)
    children.emit(name, got.get("holds") is True, outcome=got["outcome"])

if sys.argv[1:2] == ["--child"]:
    sys.exit(children.serve({{"case": case}}, sys.argv[2], json.loads(sys.argv[3])))
children.side_by_side(*(partial(check, f"case{{i}}") for i in range({count})))
sys.exit(1 if children.FAILED else 0)
"""


def one(script: Path, jobs: int) -> float:
    env = {**os.environ, "INFINI_STACK_CHECK_JOBS": str(jobs)}
    start = time.monotonic()
    subprocess.run([sys.executable, str(script)], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--children", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--import", dest="module", default="torch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="check-pool-") as tmp:
        script = Path(tmp) / "check.py"
        script.write_text(
            SCRIPT.format(checks=str(CHECKS), module=args.module, count=args.children)
        )
        load = os.getloadavg()[0]
        times: dict[int, list[float]] = {1: [], args.jobs: []}
        for _ in range(args.runs):
            for jobs, taken in times.items():
                taken.append(one(script, jobs))
    serial, side = (statistics.median(times[j]) for j in (1, args.jobs))
    print(f"{args.children} children importing {args.module}, {args.runs} runs each")
    print(f"jobs 1: median {serial:.1f}s {[round(t, 1) for t in times[1]]}")
    print(f"jobs {args.jobs}: median {side:.1f}s {[round(t, 1) for t in times[args.jobs]]}")
    print(f"ratio {side / serial:.2f}; load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
