"""A no-op ``build`` of the mini stack against running ``ninja`` once in each component's build dir.

    python benchmarks/noop_build.py [--runs 9] [--vendor cpu] [--switch nvidia] [--home DIR]

Builds the bundled mini stack into a fresh home (cold, timed), then times, as medians of
``--runs`` runs each:

- ``noop build``: ``python -m builder build`` with nothing changed (a new interpreter each time,
  as a person or CI runs it);
- ``ninja sum``: ``ninja`` run once in every component's build directory, summed per round;
- ``interpreter``: ``python -c pass``, the floor under any Python command on this host;
- ``in-process``: the ``build`` command called again inside one interpreter, which leaves out
  interpreter start-up and module imports (what the engine itself costs).

The target is noop build <= 1.5 x ninja sum. With ``--switch V`` it also times a build for vendor
V (cold) and the switch back (all hits). Python runs with bytecode caching on (in a private
``PYTHONPYCACHEPREFIX``), as an installed package does; ``--no-bytecode`` keeps the caller's
setting.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "mini-stack" / "stack.yaml"


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def median_of(runs: int, once: Callable[[], float]) -> float:
    once()  # warm the page cache and, for the build, the memo
    return statistics.median(once() for _ in range(runs))


def build_argv(vendor: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "builder",
        "build",
        "--manifest",
        str(MANIFEST),
        "--vendor",
        vendor,
    ]


def build_dirs(env: dict[str, str], vendor: str) -> list[Path]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "plan",
            "--manifest",
            str(MANIFEST),
            "--vendor",
            vendor,
            "--json",
        ],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [Path(c["build_dir"]) for c in json.loads(out)["components"]]


def ninja_sum(dirs: list[Path], env: dict[str, str]) -> float:
    return sum(timed(["ninja", "-C", str(d)], env) for d in dirs)


def in_process(vendor: str, home: Path) -> float:
    """The build command in this interpreter (imports already paid by the warm-up call)."""
    from builder.cli import main

    argv = ["build", "--manifest", str(MANIFEST), "--vendor", vendor, "--home", str(home)]
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    assert code == 0
    return time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--vendor", default="cpu")
    parser.add_argument("--switch", metavar="VENDOR", help="also time a switch to VENDOR and back")
    parser.add_argument(
        "--home", type=Path, help="state directory (default: a fresh temporary one)"
    )
    parser.add_argument(
        "--no-bytecode", action="store_true", help="keep the caller's bytecode settings"
    )
    args = parser.parse_args()
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))

    with tempfile.TemporaryDirectory(prefix="noop-bench-") as tmp:
        home = args.home or Path(tmp) / "home"
        env = {**os.environ, "INFINI_STACK_HOME": str(home)}
        if not args.no_bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            sys.pycache_prefix = env["PYTHONPYCACHEPREFIX"]
        print(
            f"mini stack {MANIFEST}, vendor {args.vendor}, {os.cpu_count()} cores, "
            f"home {home}, bytecode cache {'caller' if args.no_bytecode else 'on'}"
        )
        cold = timed(build_argv(args.vendor), env)
        print(f"cold build:        {cold:7.2f} s   ({' '.join(build_argv(args.vendor)[1:])})")
        dirs = build_dirs(env, args.vendor)

        noop = median_of(args.runs, lambda: timed(build_argv(args.vendor), env))
        ninja = median_of(args.runs, lambda: ninja_sum(dirs, env))
        interpreter = median_of(args.runs, lambda: timed([sys.executable, "-c", "pass"], env))
        os.environ["INFINI_STACK_HOME"] = str(home)
        engine = median_of(args.runs, lambda: in_process(args.vendor, home))
        last = json.loads((home / "runs" / "last.json").read_text())
        assert {c["status"] for c in last["components"]} == {"hit"}, "the no-op built something"

        print(
            f"noop build:        {ms(noop)}   (median of {args.runs}; "
            f"fast path: {last['fast_path']})"
        )
        print(f"ninja sum:         {ms(ninja)}   (ninja once in each of {len(dirs)} build dirs)")
        print(f"ratio:             {noop / ninja:7.2f} x   (target <= 1.5)")
        print(
            f"interpreter:       {ms(interpreter)}   (python -c pass: "
            f"{interpreter / ninja:.2f} x ninja sum on its own)"
        )
        print(
            f"in-process:        {ms(engine)}   (build command without interpreter start-up "
            f"and imports: {engine / ninja:.2f} x ninja sum)"
        )
        print(
            f"noop - interpreter:{ms(noop - interpreter)}   "
            f"({(noop - interpreter) / ninja:.2f} x ninja sum)"
        )
        if args.switch:
            there = timed(build_argv(args.switch), env)
            back = timed(build_argv(args.vendor), env)
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
