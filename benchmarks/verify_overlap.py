"""A cold ``wheel --verify`` with the second build beside the first, against the same with the
second build after the first (``INFINI_STACK_VERIFY=after``), in one run.

    python benchmarks/verify_overlap.py [--runs 3] [--manifest stack.yaml] [--vendor cpu]
                                        [--jobs N] [-- MORE OPTIONS]

Each run starts from a fresh state home (so both builds are cold), the two orders interleaved;
the medians and their ratio are printed with the load average at the start and the end. The
default is the bundled mini stack on cpu; ``--manifest``/``--vendor``/``--`` options time another
stack (the real one from mirrors: ``-- --mirror https://github.com/=DIR/``).
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

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "examples" / "mini-stack" / "stack.yaml"


def one(order: str, manifest: Path, vendor: str, jobs: int, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="verify-overlap-") as tmp:
        argv = [
            sys.executable, "-m", "builder", "wheel", "--manifest", str(manifest),
            "--vendor", vendor, "--verify", "--home", f"{tmp}/home", "--out", f"{tmp}/out",
            "--jobs", str(jobs), "--launcher", "none", *extra,
        ]  # fmt: skip
        env = {**os.environ, "INFINI_STACK_VERIFY": order}
        start = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            sys.exit(f"{order}: exit {done.returncode}\n{done.stderr[-2000:]}")
        if ("beside the first build" in done.stderr) != (order == "beside"):
            sys.exit(f"{order}: the second build did not run {order} the first")
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--manifest", type=Path, default=MINI)
    parser.add_argument("--vendor", default="cpu")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("extra", nargs="*", help="more options for `wheel` (after --)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    times: dict[str, list[float]] = {"beside": [], "after": []}
    for _ in range(args.runs):
        for order, values in times.items():
            values.append(one(order, args.manifest, args.vendor, args.jobs, args.extra))
    beside, after = (statistics.median(times[o]) for o in ("beside", "after"))
    for order, values in times.items():
        print(f"{order:>6}: median {statistics.median(values):.1f}s of {values}")
    print(f"cold wheel --verify, second build beside / after: {beside / after:.2f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
