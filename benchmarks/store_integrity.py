"""What checking the store costs: the no-op ``build`` and an all-hits ``wheel`` of the mini stack,
this checkout against another revision, side by side, in one run.

    python benchmarks/store_integrity.py --base REV [--runs 11] [--wheel-runs 5]

Each tree (``git archive REV`` for the base, this checkout's files for the other) is installed
into a fresh virtual environment (a regular install), builds the bundled mini stack into a home
of its own (cold), and leaves one wheel; then, in alternating rounds, so that the shared
machine's load weighs on both alike: the no-op ``build`` of each, ``ninja`` in each build dir
(summed), and a ``wheel`` of each with every component a store hit (this checkout hashes each
entry against its install manifest first). Medians, in seconds. Also: SHA-256 over the store
entries of this checkout's home, in process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.checks.venv import make as make_venv  # noqa: E402
from builder.core import contents  # noqa: E402

MANIFEST = ROOT / "examples" / "mini-stack" / "stack.yaml"


def timed(argv: Sequence[str | Path], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [str(a) for a in argv], env=env, cwd=cwd, check=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - start


def tree_of(rev: str | None, dest: Path) -> Path:
    """The files of ``rev`` (None: this checkout's tracked and new files) under ``dest``."""
    dest.mkdir(parents=True)
    if rev is None:
        files = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout.decode().split("\0")  # fmt: skip
        for name in filter(None, files):
            if (ROOT / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, dest / name)
        return dest
    archive = dest.with_suffix(".tar")
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, stdout=out)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest


class Side:
    def __init__(self, name: str, tree: Path, work: Path) -> None:
        self.name = name
        venv = work / f"venv-{name}"
        python = make_venv(venv, sys.executable)
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(tree)], check=True)
        self.bin = venv / "bin" / "infini-stack"
        self.home = work / f"home-{name}"
        self.cwd = work
        path = f"{venv / 'bin'}:{os.environ['PATH']}"
        self.env = {**os.environ, "PATH": path, "INFINI_STACK_HOME": str(self.home)}
        self.argv: list[str | Path] = [
            self.bin,
            "build",
            "--manifest",
            MANIFEST,
            "--vendor",
            "cpu",
            "--jobs",
            "2",
        ]
        time.sleep(1.1)  # files younger than a second are not trusted by the memo
        timed(self.argv, self.env, work)  # cold
        self.out = work / f"dist-{name}"

    def noop(self) -> float:
        return timed(self.argv, self.env, self.cwd)

    def wheel(self) -> float:
        argv: list[str | Path] = [
            self.bin,
            "wheel",
            "--manifest",
            MANIFEST,
            "--vendor",
            "cpu",
            "--out",
            self.out,
        ]
        return timed([*argv, "--progress", "quiet"], self.env, self.cwd)

    def ninja(self) -> float:
        dirs = sorted((self.home / "build").iterdir())
        return sum(timed(["ninja", "-C", d], self.env, d) for d in dirs)


def medians(runs: int, measures: Sequence[Callable[[], float]]) -> list[float]:
    for once in measures:
        once()
    rounds = [[once() for once in measures] for _ in range(runs)]
    return [statistics.median(column) for column in zip(*rounds, strict=True)]


def hashing(store: Path) -> tuple[int, float]:
    files = [p for p in store.glob("*/prefix/**/*") if p.is_file() and not p.is_symlink()]
    start = time.perf_counter()
    for p in files:
        contents.file_digest(p)
    return sum(p.stat().st_size for p in files), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare with")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--wheel-runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-integrity-") as tmp:
        work = Path(tmp)
        base = Side("base", tree_of(args.base, work / "base"), work)
        new = Side("this", tree_of(None, work / "this"), work)
        noop = medians(args.runs, [base.noop, new.noop, base.ninja, new.ninja])
        print(f"noop build, ninja sum (base, this): {noop}", file=sys.stderr)
        wheel = medians(args.wheel_runs, [base.wheel, new.wheel])
        same = [p.read_bytes() for p in sorted(base.out.glob("*.whl"))] == [
            p.read_bytes() for p in sorted(new.out.glob("*.whl"))
        ]
        size, seconds = hashing(new.home / "store")
    print(
        json.dumps(
            {
                "base": args.base,
                "noop_build": {"base": noop[0], "this": noop[1]},
                "ninja_sum": {"base": noop[2], "this": noop[3]},
                "wheel_all_hits": {"base": wheel[0], "this": wheel[1]},
                "wheels_identical": same,
                "sha256_store": {"bytes": size, "seconds": seconds},
                "runs": {"noop": args.runs, "wheel": args.wheel_runs},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
