"""A no-op ``build`` of the mini stack against running ``ninja`` once in each component's build dir.

    python benchmarks/noop_build.py [--runs 21] [--vendor cpu] [--switch nvidia]

Installs this checkout into a fresh virtual environment (a regular install, as a release
engineer or CI machine has it; ``--system-site-packages`` supplies the dependencies), builds the
bundled mini stack with it into a fresh home (cold, timed), then times, as medians of ``--runs``
runs each, in one run of this script (the no-op build and the Ninja sum in alternating rounds):

- ``noop build``: the installed ``infini-stack build`` with nothing changed, a new process each
  time, from a directory outside this checkout;
- ``python -m builder``: the same build through ``python -m builder`` (the interpreter starts
  with ``site`` and its .pth hooks);
- ``ninja sum``: ``ninja`` run once in every component's build directory, summed per round;
- ``interpreter``: ``python -c pass`` and ``python -S -c pass`` of that environment, the floor
  under any Python command;
- ``in-process``: the no-op check itself (``builder.noop.settle``), without interpreter start-up.

The target is noop build <= 1.5 x ninja sum. With ``--switch V`` it also times a build for vendor
V (cold) and the switch back (all hits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from builder.checks.venv import make as make_venv

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "mini-stack" / "stack.yaml"


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def medians(runs: int, *measures: Callable[[], float]) -> list[float]:
    """The median of each measure, taken in interleaved rounds: a change in the shared machine's
    load while the script runs weighs on every measure alike, not on whichever ran then."""
    for once in measures:
        once()  # warm the page cache and, for the build, the memo
    rounds = [[once() for once in measures] for _ in range(runs)]
    return [statistics.median(column) for column in zip(*rounds, strict=True)]


def install(venv: Path) -> Path:
    """This checkout, installed (not editable) into a new venv; returns the venv's bin dir."""
    python = make_venv(venv, sys.executable)  # sees this interpreter's packages, a venv's too
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
        check=True,
        cwd=venv,
    )
    time.sleep(1.1)  # files younger than a second are not trusted by the memo (builder/memo.py)
    return venv / "bin"


def build_dirs(bin_dir: Path, env: dict[str, str], vendor: str, cwd: Path) -> list[Path]:
    argv = [bin_dir / "infini-stack", "plan", "--manifest", MANIFEST, "--vendor", vendor, "--json"]
    out = subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True, text=True)
    return [Path(c["build_dir"]) for c in json.loads(out.stdout)["components"]]


def ninja_sum(dirs: list[Path], env: dict[str, str]) -> float:
    return sum(timed(["ninja", "-C", str(d)], env, d) for d in dirs)


def in_process(bin_dir: Path, argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """The no-op check alone, in the venv's interpreter (median of 21 calls)."""
    code = (
        "import io, contextlib, statistics, sys, time\n"
        "from builder import noop\n"
        "def once():\n"
        "    t = time.perf_counter()\n"
        "    with contextlib.redirect_stderr(io.StringIO()):\n"
        "        assert noop.settle(sys.argv[1:]) == 0\n"
        "    return time.perf_counter() - t\n"
        "print(statistics.median(once() for _ in range(21)))\n"
    )
    out = subprocess.run(
        [bin_dir / "python", "-c", code, *argv],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--vendor", default="cpu")
    parser.add_argument("--switch", metavar="VENDOR", help="also time a switch to VENDOR and back")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="noop-bench-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        home = Path(tmp) / "home"
        env = {**os.environ, "INFINI_STACK_HOME": str(home)}
        bin_dir = install(Path(tmp) / "venv")
        tool = str(bin_dir / "infini-stack")

        def build(vendor: str) -> list[str]:
            return [tool, "build", "--manifest", str(MANIFEST), "--vendor", vendor]

        print(
            f"mini stack {MANIFEST}, vendor {args.vendor}, {os.cpu_count()} cores, "
            f"{tool} (a regular install), home {home}"
        )
        cold = timed(build(args.vendor), env, work)
        print(
            f"cold build:        {cold:7.2f} s   (infini-stack {' '.join(build(args.vendor)[1:])})"
        )
        dirs = build_dirs(bin_dir, env, args.vendor, work)
        python = str(bin_dir / "python")
        as_module = [python, "-m", "builder", *build(args.vendor)[1:]]

        noop, ninja = medians(
            args.runs,
            lambda: timed(build(args.vendor), env, work),
            lambda: ninja_sum(dirs, env),
        )
        last = json.loads((home / "runs" / "last.json").read_text())
        module, bare, interpreter = medians(
            args.runs,
            lambda: timed(as_module, env, work),
            lambda: timed([python, "-S", "-c", "pass"], env, work),
            lambda: timed([python, "-c", "pass"], env, work),
        )
        check = in_process(bin_dir, build(args.vendor)[1:], env, work)
        assert {c["status"] for c in last["components"]} == {"hit"}, "the no-op built something"

        print(
            f"noop build:        {ms(noop)}   (median of {args.runs}; "
            f"fast path: {last['fast_path']})"
        )
        print(f"ninja sum:         {ms(ninja)}   (ninja once in each of {len(dirs)} build dirs)")
        print(f"ratio:             {noop / ninja:7.2f} x   (target <= 1.5)")
        print(
            f"python -m builder: {ms(module)}   ({module / ninja:.2f} x ninja sum: "
            "the interpreter starts with site)"
        )
        print(
            f"interpreter:       {ms(interpreter)}   (python -c pass; "
            f"{ms(bare).strip()} with -S: {bare / ninja:.2f} x ninja sum on its own)"
        )
        print(f"in-process check:  {ms(check)}   ({check / ninja:.2f} x ninja sum)")
        if args.switch:
            there = timed(build(args.switch), env, work)
            back = timed(build(args.vendor), env, work)
            last = json.loads((home / "runs" / "last.json").read_text())
            hits = sum(c["status"] == "hit" for c in last["components"])
            print(f"switch to {args.switch}:  {there:7.2f} s   (cold for {args.switch})")
            print(
                f"switch back:       {ms(back)}   ({hits} of {len(last['components'])} "
                "components from the store)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
