"""``infini-stack audit`` against ``auditwheel show`` on the same wheels, in one run.

For each wheel, interleaved over several runs (medians reported):
- ``auditwheel show --json`` (a subprocess, as a user runs it), and its platform tag;
- ``infini-stack audit --json --no-cache`` (cold), then with an empty cache dir (cold, filling the
  cache) and again with that cache (warm);
- ``audit_wheel`` in this process (cold, no cache);
- the decompression floor: inflating every ELF member of the wheel once, with zlib, serially.

Prints the times, the speed-up over auditwheel, the ratio to the floor and whether the platform
verdicts agree. Without arguments it benchmarks the PyTorch 2.13.0 CPU wheel, fetched with
``pip download``; when that is not obtainable it says so and uses the largest wheels it can get.

    python benchmarks/audit_vs_auditwheel.py [--runs 3] [--auditwheel-runs 3] [WHEEL ...]
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
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builder.core.layout import default_home  # noqa: E402
from wheels.audit import audit_wheel, infer_vendor  # noqa: E402
from wheels.policy import load_vendor_policy  # noqa: E402

TORCH = "torch==2.13.0"
FALLBACKS = ("nvidia-cublas", "nvidia-nccl-cu13", "numpy", "pyyaml")
TARGET_SPEEDUP = 20.0
TARGET_FLOOR_RATIO = 1.5


@dataclass
class Timings:
    auditwheel: list[float] = field(default_factory=list)
    cli_cold: list[float] = field(default_factory=list)
    cli_fill: list[float] = field(default_factory=list)
    cli_warm: list[float] = field(default_factory=list)
    inproc: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    auditwheel_tag: str | None = None
    our_auditwheel_tag: str | None = None
    our_tag: str | None = None
    elf_members: tuple[str, ...] = ()


def pip_download(spec: str, dest: Path, *extra: str) -> Path | None:
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", *extra, spec, "-d", str(dest)],
        capture_output=True,
        text=True,
        check=False,
    )
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
    print(
        f"# the PyTorch wheel ({TORCH}) is not obtainable here; using the largest wheels "
        "that can be downloaded or built instead"
    )
    got = [w for spec in FALLBACKS if (w := pip_download(spec, cache, "--only-binary=:all:"))]
    if not got:
        got = [built_wheel(cache)]
    return sorted(got, key=lambda p: p.stat().st_size, reverse=True)[:2]


def built_wheel(cache: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.wheelmaker import corpus

    print("# nothing downloadable either: building a wheel with gcc (tests/wheelmaker.py)")
    return corpus(cache / "built")["clean"]


def run_auditwheel(wheel: Path) -> tuple[float, str | None]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    try:
        tag = json.loads(proc.stdout).get("overall_tag") if proc.returncode == 0 else None
    except ValueError:
        tag = None
    return elapsed, tag


def run_cli(wheel: Path, cache_dir: Path | None) -> tuple[float, dict[str, object]]:
    cache = ["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache"]
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "builder", "audit", "--json", *cache, str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - start
    data: dict[str, object] = json.loads(proc.stdout)["wheels"][0]
    return elapsed, data


def floor(wheel: Path, members: tuple[str, ...]) -> float:
    """Inflate each ELF member once from its raw deflate stream: nothing else."""
    with zipfile.ZipFile(wheel) as zf:
        infos = [zf.getinfo(m) for m in members]
    start = time.perf_counter()
    with wheel.open("rb") as fh:
        for info in infos:
            fh.seek(info.header_offset)
            head = fh.read(30)
            fh.seek(
                info.header_offset
                + 30
                + int.from_bytes(head[26:28], "little")
                + int.from_bytes(head[28:30], "little")
            )
            raw = fh.read(info.compress_size)
            if info.compress_type == zipfile.ZIP_DEFLATED:
                zlib.decompress(raw, -15, info.file_size)
    return time.perf_counter() - start


def bench(wheel: Path, runs: int, auditwheel_runs: int) -> Timings:
    t = Timings()
    policy = load_vendor_policy(infer_vendor(wheel))
    for run in range(runs):
        seconds, data = run_cli(wheel, None)
        t.cli_cold.append(seconds)
        with tempfile.TemporaryDirectory(prefix="audit-cache-") as cache:
            seconds, _ = run_cli(wheel, Path(cache))
            t.cli_fill.append(seconds)
            seconds, _ = run_cli(wheel, Path(cache))
            t.cli_warm.append(seconds)
        t.our_auditwheel_tag = str(data["auditwheel_tag"])
        t.our_tag = str(data["tag"])
        t.elf_members = tuple(str(e["member"]) for e in data["elfs"])  # type: ignore[index, union-attr]
        t.floor.append(floor(wheel, t.elf_members))
        start = time.perf_counter()
        audit_wheel(wheel, policy)
        t.inproc.append(time.perf_counter() - start)
        if run < auditwheel_runs:
            seconds, tag = run_auditwheel(wheel)
            t.auditwheel.append(seconds)
            t.auditwheel_tag = tag
    return t


def report(wheel: Path, t: Timings) -> bool:
    med = {k: statistics.median(v) for k, v in t.__dict__.items() if isinstance(v, list) and v}
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
        elf_bytes = sum(zf.getinfo(m).file_size for m in t.elf_members)
    best = {k: min(v) for k, v in t.__dict__.items() if isinstance(v, list) and v}
    speedup = med["auditwheel"] / med["cli_cold"]
    ratio_cli = med["cli_cold"] / med["floor"]
    ratio_in = med["inproc"] / med["floor"]
    agree = t.auditwheel_tag == t.our_auditwheel_tag
    lines = [
        f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB, {len(infos)} members, "
        f"{len(t.elf_members)} ELF files, {elf_bytes / 1e6:.0f} MB of ELF inflated)",
        f"auditwheel show:                        {med['auditwheel']:7.2f} s  "
        f"(runs {_runs(t.auditwheel)}) -> {t.auditwheel_tag}",
        f"infini-stack audit, cold, no cache:     {med['cli_cold']:7.2f} s  "
        f"(runs {_runs(t.cli_cold)})",
        f"infini-stack audit, cold, filling cache: {med['cli_fill']:6.2f} s  "
        f"(runs {_runs(t.cli_fill)})",
        f"infini-stack audit, warm cache:         {med['cli_warm']:7.2f} s  "
        f"(runs {_runs(t.cli_warm)})",
        f"audit_wheel in process, no cache:       {med['inproc']:7.2f} s  (runs {_runs(t.inproc)})",
        f"decompression floor (ELF, once):        {med['floor']:7.2f} s  (runs {_runs(t.floor)})",
        f"speed-up over auditwheel (cold CLI): {speedup:.1f}x  (target >= {TARGET_SPEEDUP:.0f}x: "
        f"{'PASS' if speedup >= TARGET_SPEEDUP else 'FAIL'})",
        f"cold CLI / floor: {ratio_cli:.2f}  in-process / floor: {ratio_in:.2f}  (target <= "
        f"{TARGET_FLOOR_RATIO}: {'PASS' if ratio_cli <= TARGET_FLOOR_RATIO else 'FAIL'})",
        f"cache-filling cold CLI: {med['auditwheel'] / med['cli_fill']:.1f}x auditwheel, "
        f"{med['cli_fill'] / med['floor']:.2f} x the floor",
        f"fastest runs (less exposed to other load on the machine): auditwheel "
        f"{best['auditwheel']:.2f} s, cold CLI {best['cli_cold']:.2f} s, warm CLI "
        f"{best['cli_warm']:.2f} s, in process {best['inproc']:.2f} s, floor {best['floor']:.2f} s"
        f" -> {best['auditwheel'] / best['cli_cold']:.1f}x, cold CLI / floor "
        f"{best['cli_cold'] / best['floor']:.2f}",
        f"platform verdicts agree: {'yes' if agree else 'NO'} (auditwheel {t.auditwheel_tag}, "
        f"infini-stack {t.our_auditwheel_tag}; with the {infer_vendor(wheel)} vendor's "
        f"libraries excluded: {t.our_tag})",
    ]
    print("\n".join(lines), flush=True)
    return agree and speedup >= TARGET_SPEEDUP and ratio_cli <= TARGET_FLOOR_RATIO


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--auditwheel-runs", type=int, default=3)
    parser.add_argument(
        "--download-dir",
        type=Path,
        default=None,
        help="where downloaded wheels are kept (default: HOME/bench-wheels)",
    )
    args = parser.parse_args(argv)
    cache = args.download_dir or default_home(os.environ) / "bench-wheels"
    wheels = args.wheels or default_wheels(cache)
    load = os.getloadavg()[0]
    print(
        f"# {os.cpu_count()} cores, load average {load:.2f} at start; Python "
        f"{sys.version.split()[0]}"
    )
    results = [report(w, bench(w, args.runs, min(args.auditwheel_runs, args.runs))) for w in wheels]
    ok = all(results)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
