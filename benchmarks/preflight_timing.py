"""Wall time of ``infini-stack preflight --vendor V`` as a user runs it (a fresh process each
time, nothing cached between runs): the median of N runs, against a budget.

    python benchmarks/preflight_timing.py [--vendor nvidia] [--runs 5] [--budget 1.0]

Exit status 1 when the median exceeds the budget. Preflight's own exit status (3 when a
provider is missing on this host) does not matter here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vendor", default="nvidia")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds, for the median")
    parser.add_argument("--manifest", default=str(ROOT / "stack.yaml"))
    args = parser.parse_args()
    argv = [
        sys.executable,
        "-m",
        "builder",
        "preflight",
        "--vendor",
        args.vendor,
        "--manifest",
        args.manifest,
    ]
    env = dict(os.environ)
    one_run(argv, env)  # warm the page cache, as a user's second run would be
    times = [one_run(argv, env) for _ in range(args.runs)]
    median = statistics.median(times)
    print(
        f"preflight --vendor {args.vendor}: median {median:.3f}s of {args.runs} runs "
        f"(min {min(times):.3f}s, max {max(times):.3f}s; budget {args.budget:.1f}s; "
        f"{os.cpu_count()} cores)"
    )
    return 0 if median <= args.budget else 1


if __name__ == "__main__":
    raise SystemExit(main())
