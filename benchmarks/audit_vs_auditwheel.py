"""``infini-stack audit`` against ``auditwheel show`` on the same wheels, in one run.

    python benchmarks/audit_vs_auditwheel.py [--runs 3] [--auditwheel-runs 3] [WHEEL ...]
    python benchmarks/audit_vs_auditwheel.py --corpus DIR [--runs 3]

The tool is installed first as a user has it: this checkout ``pip install``-ed (not editable,
with its dependencies) into a fresh virtual environment; when that cannot
be done (no index reachable), into one that sees this interpreter's packages
(``builder.checks.venv.make``), which the output says. Every ``infini-stack`` timing is that
installed command, cold (``--no-cache``, a fresh state home) unless it says otherwise.

- start-up: ``infini-stack --version`` and ``infini-stack audit`` of the smallest wheel at hand
  (median of 21 runs each);
- per wheel (default: the PyTorch 2.13.0 CPU wheel, fetched with ``pip download``), interleaved
  over ``--runs`` runs, medians reported: ``auditwheel show --json`` (a subprocess, as a user
  runs it), the cold CLI, the CLI filling a cache and using it, ``audit_wheel`` in this
  process, and the decompression floors: every ELF member inflated once, serially, with zlib
  in one call (the old floor) and the way the audit now inflates (the new floor), besides each
  inflate library installed (libdeflate, ISA-L, zlib-ng, zlib), one call and streamed;
- ``--corpus DIR``: every wheel of DIR, cold CLI against auditwheel in the same run (median of
  ``--runs`` runs, interleaved, for every wheel: a single run of a big wheel moved its ratio by
  a fifth between runs here), the aggregate ratio, the median and least per-wheel ratios, the
  peak RSS of both tools (summed over each one's process tree, sampled from /proc), the
  smallest wheel's ratio, and any wheel where we are slower.

Every timed run of either tool comes after that tool has audited a small wheel, untimed, and
the wheel has been read once (see :func:`page_cached`): the kernel here pages out files left
unused for seconds, and "cold" means without the audit cache, not from disk.

Targets (cold CLI, regular install): torch >= 40x auditwheel, the corpus aggregate >= 25x, no
wheel slower than auditwheel, cold CLI / new floor <= 1.2, ``--version`` <= 40 ms and the small
audit <= 80 ms. The machine is shared: the load average is printed at the start and the end.

Each wheel's bound (:meth:`benchmarks.floors.Verified.bound`) says what any audit that checks
RECORD could reach on this machine at best: every member inflated and hashed once, spread
perfectly over the cores, the largest inflated by one of them, plus the time the interpreter
takes to start and run nothing. A target above the bound cannot be met here by such a tool.
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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.differential import measured  # noqa: E402
from benchmarks.floors import (  # noqa: E402
    Verified,
    elf_raws,
    floor_table,
    new_floor,
    old_floor,
    verified_floor,
)
from builder.checks.venv import make as make_venv  # noqa: E402
from builder.core.layout import default_home  # noqa: E402
from tests.wheelmaker import small_extension_wheel  # noqa: E402
from wheels.audit import audit_wheel, infer_vendor  # noqa: E402
from wheels.audit.pool import cores as pool_cores  # noqa: E402
from wheels.policy import load_vendor_policy  # noqa: E402

TORCH = "torch==2.13.0"
FALLBACKS = ("nvidia-cublas", "nvidia-nccl-cu13", "numpy", "pyyaml")
TARGET = {"torch": 40.0, "corpus": 25.0, "floor": 1.2, "version": 0.040, "small": 0.080}
# The corpus targets of the audit's truth-telling work: per-wheel ratios (auditwheel's median
# over ours) at least MEDIAN at the median and LEAST for every wheel, our peak RSS at most
# PEAK_MB, the aggregate no lower than AGGREGATE (its figure on 45 popular wheels before).
CORPUS_TARGET = {"median": 5.0, "least": 2.0, "peak_mb": 300.0, "aggregate": 12.3}


@dataclass
class Timings:
    """One wheel's measurements, a list of runs each."""

    auditwheel: list[float] = field(default_factory=list)
    cli_cold: list[float] = field(default_factory=list)
    cli_fill: list[float] = field(default_factory=list)
    cli_warm: list[float] = field(default_factory=list)
    inproc: list[float] = field(default_factory=list)
    old_floor: list[float] = field(default_factory=list)
    new_floor: list[float] = field(default_factory=list)
    auditwheel_tag: str | None = None
    our_auditwheel_tag: str | None = None
    our_tag: str | None = None
    elf_members: tuple[str, ...] = ()
    verified: Verified | None = None


# --- the tool as a user has it ----------------------------------------------------------------


def install(venv: Path, source: str = str(ROOT)) -> tuple[Path, str]:
    """``source`` (this checkout by default; a requirement pip takes: a directory, with extras)
    installed (not editable) into a fresh venv; its bin directory, and how."""
    python = make_venv(venv, sys.executable, inherit=False)
    done = _pip_install(python, source)
    if done.returncode == 0:
        return venv / "bin", "a fresh venv holding the tool and its dependencies"
    reason = (done.stderr.strip().splitlines() or ["?"])[-1]
    inherit = venv.with_name(venv.name + "-inherit")
    python = make_venv(inherit, sys.executable)  # sees this interpreter's packages
    # No build isolation: that would fetch setuptools from the index this fallback lacks.
    _pip_install(python, "--no-deps", "--no-build-isolation", source).check_returncode()
    return inherit / "bin", (
        "a fresh venv that reaches this interpreter's packages through a .pth file (installing "
        f"the dependencies failed: {reason})"
    )


def _pip_install(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False, cwd="/")


def fresh_env(home: Path) -> dict[str, str]:
    return {**os.environ, "INFINI_STACK_HOME": str(home), "XDG_CACHE_HOME": str(home)}


def timed(argv: Sequence[str | Path], env: dict[str, str]) -> tuple[float, str]:
    """Seconds and stdout of one run (in a directory outside the checkout)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, check=False, env=env, cwd="/"
    )
    return time.perf_counter() - start, proc.stdout


LAST_PEAK: list[int] = [0]


def timed_peak(argv: Sequence[str | Path], env: dict[str, str]) -> tuple[float, str]:
    """:func:`timed`, through ``benchmarks/treepeak.py``, which also samples the run's peak RSS
    summed over its process tree (kB) into :data:`LAST_PEAK`; its own start is not timed."""
    proc, seconds, peak = measured([str(a) for a in argv], env, 3600)
    LAST_PEAK[0] = peak
    return seconds, proc.stdout if proc is not None else ""


WARM_UP: list[Path] = []  # the small wheel each tool audits, untimed, before each timed run
START: list[float] = [0.0]  # seconds for the venv's interpreter to run nothing (startup())


def page_cached(wheel: Path) -> None:
    """Read ``wheel`` once, so that the run timed next finds it in the page cache: a kernel may
    page out file pages left unused for seconds (this machine's does, DAMON's ``pageout``), and
    a run that reads the wheel from disk would time the disk. Done before every timed run of
    either tool, after that tool has audited a small wheel untimed (:data:`WARM_UP`), which
    brings its own files (interpreter, modules, libraries) back in the same way."""
    with wheel.open("rb") as fh:
        while fh.read(16 << 20):
            pass


def run_cli(tool: Path, wheel: Path, cache_dir: Path | None) -> tuple[float, dict[str, object]]:
    cache = ["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache"]
    for small in WARM_UP:
        timed([tool, "audit", "--no-cache", small], {**os.environ})
    page_cached(wheel)
    with tempfile.TemporaryDirectory(prefix="bench-home-") as home:
        seconds, out = timed_peak([tool, "audit", "--json", *cache, wheel], fresh_env(Path(home)))
    data: dict[str, object] = json.loads(out)["wheels"][0]
    return seconds, data


def run_auditwheel(tool: Path, wheel: Path) -> tuple[float, str | None]:
    """``auditwheel show`` as installed beside the tool (the version it depends on)."""
    show: list[str | Path] = [tool.parent / "python", "-m", "auditwheel", "show", "--json"]
    for small in WARM_UP:
        timed([*show, small], {**os.environ})
    page_cached(wheel)
    seconds, out = timed_peak([*show, wheel], {**os.environ})
    try:
        tag = json.loads(out).get("overall_tag")
    except ValueError:
        tag = None
    return seconds, tag


def median_ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# --- start-up ---------------------------------------------------------------------------------


def startup(tool: Path, small: Path, runs: int = 21) -> tuple[list[str], bool]:
    """``--version`` and the audit of ``small``, each the median of ``runs`` runs, interleaved."""
    with tempfile.TemporaryDirectory(prefix="bench-home-") as home:
        env = fresh_env(Path(home))
        measures: dict[str, list[str | Path]] = {
            "interpreter": [tool.parent / "python", "-I", "-S", "-c", "pass"],
            "version": [tool, "--version"],
            "small": [tool, "audit", "--no-cache", small],
            "small, cache": [tool, "audit", small],
        }
        for argv in measures.values():
            timed(argv, env)  # warm the page cache (and, for the last, the audit cache)
        times: dict[str, list[float]] = {k: [] for k in measures}
        for _ in range(runs):
            for key, argv in measures.items():
                times[key].append(timed(argv, env)[0])
    version = statistics.median(times["version"])
    small_s = statistics.median(times["small"])
    START[:] = [statistics.median(times["interpreter"])]
    lines = [
        f"start-up: the interpreter alone (python -I -S -c pass) {median_ms(times['interpreter'])}",
        f"start-up: infini-stack --version {median_ms(times['version'])} (target <= 40 ms: "
        f"{verdict(version <= TARGET['version'])})",
        f"start-up: infini-stack audit --no-cache {small.name} ({small.stat().st_size / 1e3:.0f} "
        f"kB) {median_ms(times['small'])} (target <= 80 ms: "
        f"{verdict(small_s <= TARGET['small'])}); with its audit cache "
        f"{median_ms(times['small, cache'])}",
    ]
    return lines, version <= TARGET["version"] and small_s <= TARGET["small"]


# --- one wheel, in detail ---------------------------------------------------------------------


def pip_download(spec: str, dest: Path, *extra: str) -> Path | None:
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", *extra, spec, "-d", str(dest)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    name = spec.split("=", 1)[0].replace("-", "_").lower()
    found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(name))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"# could not download {spec}: {tail[0]}")
        return None
    fresh = [p for p in found if p not in before]
    return (fresh or found)[-1]


def default_wheels(cache: Path) -> list[Path]:
    torch = pip_download(TORCH, cache)
    if torch is not None:
        return [torch]
    print(f"# {TORCH} is not obtainable here; using the largest wheels that can be had instead")
    got = [w for spec in FALLBACKS if (w := pip_download(spec, cache, "--only-binary=:all:"))]
    return sorted(got, key=lambda p: p.stat().st_size, reverse=True)[:2]


def bench(tool: Path, wheel: Path, runs: int, auditwheel_runs: int) -> Timings:
    t = Timings()
    policy = load_vendor_policy(infer_vendor(wheel))
    for run in range(runs):
        seconds, data = run_cli(tool, wheel, None)
        t.cli_cold.append(seconds)
        with tempfile.TemporaryDirectory(prefix="audit-cache-") as cache:
            t.cli_fill.append(run_cli(tool, wheel, Path(cache))[0])
            t.cli_warm.append(run_cli(tool, wheel, Path(cache))[0])
        t.our_auditwheel_tag, t.our_tag = str(data["auditwheel_tag"]), str(data["tag"])
        t.elf_members = tuple(str(e["member"]) for e in data["elfs"])  # type: ignore[attr-defined]
        raws = elf_raws(wheel, t.elf_members)
        t.old_floor.append(old_floor(raws))
        t.new_floor.append(new_floor(raws))
        page_cached(wheel)
        start = time.perf_counter()
        audit_wheel(wheel, policy)
        t.inproc.append(time.perf_counter() - start)
        if run < auditwheel_runs:
            seconds, tag = run_auditwheel(tool, wheel)
            t.auditwheel.append(seconds)
            t.auditwheel_tag = tag
    t.verified = verified_floor(wheel)
    return t


def bound_line(wheel: Verified, med: dict[str, float]) -> str:
    """The least any audit that checks RECORD takes here (:meth:`Verified.bound`), against
    the medians in ``med`` of auditwheel, the cold CLI and the new floor."""
    cores = pool_cores()
    least = wheel.bound(cores, START[0])
    return (
        f"bound: every member inflated and sha256-hashed {wheel.total:.2f} s in one thread, the "
        f"largest inflated {wheel.largest:.2f} s; spread over {cores} cores, plus "
        f"{START[0] * 1000:.0f} ms to start an interpreter, no audit that checks RECORD takes "
        f"less than {least:.2f} s here: at most {med['auditwheel'] / least:.1f}x auditwheel "
        f"(cold CLI / that bound {med['cli_cold'] / least:.2f}; that bound / new floor: "
        f"{least / med['new_floor']:.2f})"
    )


def report(wheel: Path, t: Timings) -> bool:
    med = {k: statistics.median(v) for k, v in vars(t).items() if isinstance(v, list) and v}
    speedup = med["auditwheel"] / med["cli_cold"]
    to_floor = med["cli_cold"] / med["new_floor"]
    agree = t.auditwheel_tag == t.our_auditwheel_tag

    def row(label: str, key: str) -> str:
        runs = ", ".join(f"{v:.2f}" for v in getattr(t, key))
        return f"{label:44s} {med[key]:7.2f} s  (runs {runs})"

    lines = [
        f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB, "
        f"{len(t.elf_members)} ELF files)",
        row("auditwheel show", "auditwheel") + f" -> {t.auditwheel_tag}",
        row("infini-stack audit, cold, no cache", "cli_cold"),
        row("infini-stack audit, cold, filling its cache", "cli_fill"),
        row("infini-stack audit, warm cache", "cli_warm"),
        row("audit_wheel in process, no cache", "inproc"),
        row("old floor: ELF members, zlib, one call each", "old_floor"),
        row("new floor: ELF members, as the audit inflates", "new_floor"),
        f"new floor / old floor: {med['new_floor'] / med['old_floor']:.2f}",
        f"speed-up over auditwheel (cold CLI): {speedup:.1f}x (target >= {TARGET['torch']:.0f}x: "
        f"{verdict(speedup >= TARGET['torch'])})",
        f"cold CLI / new floor: {to_floor:.2f} (target <= {TARGET['floor']}: "
        f"{verdict(to_floor <= TARGET['floor'])}); cold CLI / old floor: "
        f"{med['cli_cold'] / med['old_floor']:.2f}; in process / new floor: "
        f"{med['inproc'] / med['new_floor']:.2f}",
        f"platform verdicts agree: {'yes' if agree else 'NO'} (auditwheel {t.auditwheel_tag}, "
        f"infini-stack {t.our_auditwheel_tag}; vendor {infer_vendor(wheel)}: {t.our_tag})",
        *([bound_line(t.verified, med)] if t.verified else []),
        *floor_table(elf_raws(wheel, t.elf_members)),
    ]
    print("\n".join(lines), flush=True)
    return agree and speedup >= TARGET["torch"] and to_floor <= TARGET["floor"]


# --- a directory of wheels ----------------------------------------------------------------------


@dataclass
class CorpusRow:
    """One wheel of ``--corpus``: the medians of both tools and their tags."""

    wheel: Path
    ours: float
    theirs: float
    agree: bool
    floor: Verified  # every member inflated and hashed once, one thread
    peak_ours: int = 0  # kB, the largest of its processes, the most of its runs
    peak_theirs: int = 0

    @property
    def ratio(self) -> float:
        """auditwheel's median over ours."""
        return self.theirs / self.ours


def corpus_row(tool: Path, wheel: Path, runs: int) -> CorpusRow:
    ours: list[float] = []
    theirs: list[float] = []
    peaks = [0, 0]
    for _ in range(runs):  # interleaved: a change of load weighs on both alike
        seconds, data = run_cli(tool, wheel, None)
        ours.append(seconds)
        peaks[0] = max(peaks[0], LAST_PEAK[0])
        seconds, tag = run_auditwheel(tool, wheel)
        theirs.append(seconds)
        peaks[1] = max(peaks[1], LAST_PEAK[0])
    agree = tag == data.get("auditwheel_tag")
    floor = verified_floor(wheel)
    med = statistics.median
    return CorpusRow(wheel, med(ours), med(theirs), agree, floor, peaks[0], peaks[1])


def corpus(tool: Path, directory: Path, runs: int) -> bool:
    wheels = sorted(directory.glob("*.whl"), key=lambda p: p.stat().st_size)
    rows = []
    cores = pool_cores()
    for wheel in wheels:
        rows.append(corpus_row(tool, wheel, runs))
        r = rows[-1]
        print(
            f"{wheel.name[:70]:70s} {wheel.stat().st_size / 1e6:8.2f} MB  auditwheel "
            f"{r.theirs:6.2f} s  ours {r.ours:5.2f} s  {r.ratio:6.1f}x  floor "
            f"{r.floor.total:5.2f} s  bound {r.floor.bound(cores, START[0]):5.2f} s  peak RSS "
            f"auditwheel {r.peak_theirs / 1e3:5.0f} MB ours {r.peak_ours / 1e3:5.0f} MB"
            f"{'' if r.agree else '  TAGS DIFFER'}",
            flush=True,
        )
    ours, theirs = sum(r.ours for r in rows), sum(r.theirs for r in rows)
    slower = [r for r in rows if r.ours > r.theirs]
    smallest = rows[0]
    aggregate = theirs / ours
    floor = sum(r.floor.total for r in rows)
    least_bound = sum(r.floor.bound(cores, START[0]) for r in rows)
    median = statistics.median(r.ratio for r in rows)
    worst = min(rows, key=lambda r: r.ratio)
    peak = max(rows, key=lambda r: r.peak_ours)
    peak_theirs = max(rows, key=lambda r: r.peak_theirs)
    want = CORPUS_TARGET
    met = {
        "median": median >= want["median"],
        "least": worst.ratio >= want["least"],
        "peak": peak.peak_ours <= want["peak_mb"] * 1e3,
        "aggregate": aggregate >= want["aggregate"],
        "slower": not slower,
    }
    print(
        f"corpus: {len(rows)} wheels, medians of {runs} runs each, auditwheel {theirs:.1f} s, "
        f"ours {ours:.1f} s: aggregate {aggregate:.1f}x (target >= {want['aggregate']}x: "
        f"{verdict(met['aggregate'])}; the older target >= {TARGET['corpus']:.0f}x: "
        f"{verdict(aggregate >= TARGET['corpus'])})\n"
        f"median per-wheel ratio {median:.1f}x (target >= {want['median']:.0f}x: "
        f"{verdict(met['median'])})\n"
        f"least per-wheel ratio {worst.ratio:.1f}x, {worst.wheel.name} (auditwheel "
        f"{worst.theirs:.2f} s, ours {worst.ours:.2f} s; target >= {want['least']:.0f}x: "
        f"{verdict(met['least'])})\n"
        f"peak RSS (the process tree summed): ours {peak.peak_ours / 1e3:.0f} MB "
        f"({peak.wheel.name}; target <= "
        f"{want['peak_mb']:.0f} MB: {verdict(met['peak'])}), auditwheel "
        f"{peak_theirs.peak_theirs / 1e3:.0f} MB ({peak_theirs.wheel.name})\n"
        f"floor: every member inflated and sha256-hashed once, {floor:.1f} s in one thread; "
        f"bound: each wheel's spread over {cores} cores (but its largest member inflated by "
        f"one), plus {START[0] * 1000:.0f} ms per wheel to start an interpreter, "
        f"{least_bound:.1f} s: no audit that checks RECORD can beat {theirs / least_bound:.1f}x "
        f"here (ours / that bound {ours / least_bound:.2f})\n"
        f"smallest: {smallest.wheel.name} {smallest.ratio:.1f}x "
        f"(auditwheel {smallest.theirs * 1000:.0f} ms, ours {smallest.ours * 1000:.0f} ms)\n"
        f"slower than auditwheel: {len(slower)} "
        f"({', '.join(f'{r.wheel.name} {r.ratio:.2f}x' for r in slower) or 'none'}; "
        f"target none: {verdict(met['slower'])}); tags differ on "
        f"{sum(not r.agree for r in rows)}",
        flush=True,
    )
    return all(met.values()) and all(r.agree for r in rows)


# --- the run ------------------------------------------------------------------------------------


def _detail(tool: Path, wheel: Path, runs: int, auditwheel_runs: int) -> Callable[[], bool]:
    return lambda: report(wheel, bench(tool, wheel, runs, auditwheel_runs))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--corpus", type=Path, help="a directory of wheels to time as a whole")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--auditwheel-runs", type=int, default=3)
    parser.add_argument(
        "--download-dir", type=Path, help="where downloaded wheels are kept (HOME/bench-wheels)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"# {pool_cores()} cores, load average {os.getloadavg()[0]:.2f} at start; Python "
        f"{sys.version.split()[0]}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-venv-") as tmp:
        bin_dir, how = install(Path(tmp) / "venv")
        tool = bin_dir / "infini-stack"
        print(f"# infini-stack: {how}", flush=True)
        checks: list[Callable[[], bool]] = []
        if args.corpus:
            wheels = sorted(args.corpus.glob("*.whl"), key=lambda p: p.stat().st_size)
            checks.append(lambda: corpus(tool, args.corpus, args.runs))
        else:
            cache = args.download_dir or default_home(os.environ) / "bench-wheels"
            wheels = args.wheels or default_wheels(cache)
            runs = min(args.auditwheel_runs, args.runs)
            checks += [_detail(tool, w, args.runs, runs) for w in wheels]
        smallest = min(wheels, key=lambda p: p.stat().st_size)
        small = small_extension_wheel(Path(tmp) / "small") or smallest
        lines, ok = startup(tool, small)
        print("\n".join(lines), flush=True)
        WARM_UP.append(small)
        results = [ok] + [check() for check in checks]
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
