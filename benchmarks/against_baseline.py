"""``infini-stack`` against another checkout of itself (the baseline), side by side in one run.

    python benchmarks/against_baseline.py --baseline DIR [--baseline-extras fast] [--runs 7]
        [--corpus DIR] [WHEEL ...]

Both checkouts are ``pip install``-ed (not editable) into fresh virtual environments, this one
plain, the baseline with ``--baseline-extras`` (so a baseline that needed an extra for its best
figures gets it). Every run is cold (``--no-cache``, a fresh state home) and comes after the
same tool audited a small wheel untimed and the wheel was read into the page cache (see
:func:`benchmarks.audit_vs_auditwheel.page_cached`). Runs of the two tools are interleaved and
reported as medians, with this checkout's time over the baseline's:

- ``--version``, and the audit of a 3 kB wheel with one extension module;
- each WHEEL given (MarkupSafe, the PyTorch CPU wheel, ...);
- ``--corpus DIR``: every wheel of DIR, once per run each, with ``auditwheel show`` once per
  wheel beside them: the aggregate of each tool (the sum of auditwheel's times over the sum of
  its own), and every wheel where this checkout is slower than auditwheel.

Targets (this checkout): ``--version`` <= 60 ms, the small audit <= 100 ms, each WHEEL and the
corpus aggregate no worse than the baseline by more than 5%, no wheel slower than auditwheel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.audit_vs_auditwheel import (  # noqa: E402
    WARM_UP,
    fresh_env,
    install,
    run_auditwheel,
    run_cli,
    timed,
)
from tests.wheelmaker import small_extension_wheel  # noqa: E402

TARGET = {"version": 0.060, "small": 0.100, "slower_by": 1.05}


def ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def ratio(ours: Sequence[float], base: Sequence[float]) -> float:
    return statistics.median(ours) / statistics.median(base)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def startup(tools: dict[str, Path], small: Path, runs: int) -> tuple[list[str], bool]:
    """``--version`` and the audit of ``small`` by each tool, interleaved, medians."""
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-home-") as home:
        env = fresh_env(Path(home))
        argvs: dict[tuple[str, str], list[str | Path]] = {
            (name, what): [tool, *args]
            for name, tool in tools.items()
            for what, args in (
                ("version", ["--version"]),
                ("small", ["audit", "--no-cache", small]),
            )
        }
        for argv in argvs.values():
            timed(argv, env)  # warm the page cache
        for _ in range(runs):
            for key, argv in argvs.items():
                times.setdefault(key, []).append(timed(argv, env)[0])
    lines, ok = [], True
    for what, label in (("version", "--version"), ("small", f"audit --no-cache {small.name}")):
        ours, base = times[("ours", what)], times[("baseline", what)]
        met = statistics.median(ours) <= TARGET[what]
        ok = ok and met
        lines.append(
            f"{label}: baseline {ms(base)}, ours {ms(ours)} ({ratio(ours, base):.2f}x; target "
            f"<= {TARGET[what] * 1000:.0f} ms: {verdict(met)})"
        )
    return lines, ok


def per_wheel(tools: dict[str, Path], wheel: Path, runs: int) -> tuple[str, bool]:
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(runs):
        for name, tool in tools.items():
            times[name].append(run_cli(tool, wheel, None)[0])
    change = ratio(times["ours"], times["baseline"])
    ok = change <= TARGET["slower_by"]
    line = (
        f"{wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB): baseline {ms(times['baseline'])}, "
        f"ours {ms(times['ours'])} ({change:.2f}x; target <= {TARGET['slower_by']:.2f}x: "
        f"{verdict(ok)})"
    )
    return line, ok


def corpus(tools: dict[str, Path], directory: Path, runs: int) -> tuple[list[str], bool]:
    wheels = sorted(directory.glob("*.whl"), key=lambda p: p.stat().st_size)
    sums = dict.fromkeys([*tools, "auditwheel"], 0.0)
    slower: list[str] = []
    for wheel in wheels:
        theirs = run_auditwheel(tools["ours"], wheel)[0]
        medians = {
            name: statistics.median(run_cli(tool, wheel, None)[0] for _ in range(runs))
            for name, tool in tools.items()
        }
        sums["auditwheel"] += theirs
        for name, seconds in medians.items():
            sums[name] += seconds
        if medians["ours"] > theirs:
            slower.append(f"{wheel.name} (auditwheel {theirs:.2f} s, ours {medians['ours']:.2f} s)")
        print(
            f"  {wheel.name}: auditwheel {theirs:.3f} s, baseline {medians['baseline']:.3f} s, "
            f"ours {medians['ours']:.3f} s",
            flush=True,
        )
    change = sums["ours"] / sums["baseline"]
    ok = change <= TARGET["slower_by"] and not slower
    lines = [
        f"corpus: {len(wheels)} wheels, auditwheel {sums['auditwheel']:.1f} s, baseline "
        f"{sums['baseline']:.1f} s (aggregate {sums['auditwheel'] / sums['baseline']:.1f}x), "
        f"ours {sums['ours']:.1f} s (aggregate {sums['auditwheel'] / sums['ours']:.1f}x); ours "
        f"over baseline {change:.2f}x (target <= {TARGET['slower_by']:.2f}x: "
        f"{verdict(change <= TARGET['slower_by'])})",
        f"slower than auditwheel: {len(slower)} ({'; '.join(slower) or 'none'}; target none: "
        f"{verdict(not slower)})",
    ]
    return lines, ok


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--baseline-extras", default="", help="extras for the baseline's install")
    parser.add_argument("--corpus", type=Path, help="a directory of wheels to time as a whole")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--startup-runs", type=int, default=21)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-venv-") as tmp:
        extras = f"[{args.baseline_extras}]" if args.baseline_extras else ""
        tools: dict[str, Path] = {}
        for name, root, how in (("baseline", args.baseline, extras), ("ours", ROOT, "")):
            bin_dir, made = install(Path(tmp) / name, f"{root.resolve()}{how}")
            tools[name] = bin_dir / "infini-stack"
            print(f"# {name}: {root}{how}: {made}", flush=True)
        small = small_extension_wheel(Path(tmp) / "small")
        if small is None:
            print("# gcc is needed for the small wheel")
            return 2
        WARM_UP.append(small)
        lines, ok = startup(tools, small, args.startup_runs)
        print("\n".join(lines), flush=True)
        results = [ok]
        for wheel in args.wheels:
            line, ok = per_wheel(tools, wheel, args.runs)
            print(line, flush=True)
            results.append(ok)
        if args.corpus:
            lines, ok = corpus(tools, args.corpus, max(1, args.runs // 3))
            print("\n".join(lines), flush=True)
            results.append(ok)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
