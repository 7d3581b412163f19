#!/usr/bin/env python3
"""The differential run: ``infini-stack audit`` against ``auditwheel show`` on pinned real wheels.

    python benchmarks/differential.py [--wheels tests/differential/wheels.txt]
        [--known tests/differential/known-differences.txt] [--cache DIR] [--no-download]
        [--only SUBSTRING]... [--timeout 900] [--json FILE]

Each entry of the list (``name==version  # kind | file: EXACT-FILE-NAME [| index: URL]``) is
``pip download``-ed into the cache directory (``--cache``, else
``$INFINI_STACK_DIFFERENTIAL_CACHE``, else ``differential-wheels`` under the state home) unless
its file is there already; pip is given the file's own platform tags, so it picks that very
file (when pip's configuration offers another build, it asks again ``--isolated``). Then, one
wheel at a time, the file read once into the page cache first:

- ``python -m auditwheel show --json WHEEL``: its overall platform tag;
- ``python -m builder audit --json --no-cache WHEEL`` (this checkout) in a fresh, empty state
  home: ``auditwheel_tag``, our mirror of ``auditwheel show``, any internal error, and the exit
  status, which must be 0 where auditwheel's tag accepts the declared tags (of its libc family)
  and 6 where it does not, unless the known-differences file lists ``FILE exit=N # reason``.

Each tool runs under ``benchmarks/treepeak.py``, which reports its time and peak RSS: the RSS
of every process of its tree (the audit forks children), sampled from ``/proc`` and summed.

Our bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``, filled by one untimed audit)
as an installed tool's and auditwheel's own are, although the environment may say
``PYTHONDONTWRITEBYTECODE``. Prints both tags, the agreement and both times per wheel, then the
aggregate: agreement, sum of auditwheel's times over sum of ours, the median per-wheel ratio and
the ratio on the smallest wheel. A disagreement is either fixed or listed in the known-differences
file with the reason auditwheel is wrong (``FILE  auditwheel=TAG  ours=TAG  # reason``). Exit
status 1 on an unlisted disagreement, an internal error or crash of our audit, or a wheel that
could not be had; 0 otherwise. Why each wheel is in the corpus is said beside it in the list.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "differential" / "wheels.txt"
KNOWN = ROOT / "tests" / "differential" / "known-differences.txt"
CACHE_ENV = "INFINI_STACK_DIFFERENTIAL_CACHE"
AUDIT_OK, AUDIT_VIOLATIONS = 0, 6  # builder.core.errors.EXIT_AUDIT
TREEPEAK = "@@TREEPEAK@@"  # benchmarks/treepeak.py's last line


@dataclass(frozen=True)
class Entry:
    """One pinned wheel of the list."""

    spec: str
    kind: str
    file: str
    index: str | None = None


@dataclass
class Result:
    """What both tools said about one wheel, and how long each took."""

    file: str
    size: int
    auditwheel: str | None
    ours: str | None
    t_auditwheel: float
    t_ours: float
    auditwheel_error: str | None = None
    internal: str | None = None  # our internal error or crash, if any
    exit_ours: int | None = None  # our exit status
    exit_expected: int | None = None  # 0 where auditwheel accepts the declared tags, else 6
    rss_auditwheel: int = 0  # peak RSS of the process tree, summed, kB
    rss_ours: int = 0

    @property
    def agree(self) -> bool | None:
        """None when auditwheel gave no verdict and we gave none either: nothing to compare."""
        if self.auditwheel is None and self.auditwheel_error:
            return None
        return self.auditwheel == self.ours

    @property
    def speedup(self) -> float | None:
        return self.t_auditwheel / self.t_ours if self.t_ours > 0 else None


# --- the list and the known differences ------------------------------------------------------


def read_list(path: Path) -> list[Entry]:
    """The pinned wheels; a line without ``| file:`` is an error naming the line."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        spec, _, comment = line.partition("#")
        fields = [f.strip() for f in comment.split("|")]
        named = dict(f.split(":", 1) for f in fields[1:] if ":" in f)
        file = named.get("file", "").strip()
        if not file:
            raise SystemExit(f"{path}:{number}: no '| file: WHEEL' in the comment")
        index = named.get("index", "").strip() or None
        entries.append(Entry(spec.strip(), fields[0], file, index))
    return entries


def read_known(path: Path) -> dict[str, tuple[str, str, str]]:
    """FILE -> (auditwheel's tag, ours, the reason auditwheel is wrong)."""
    known: dict[str, tuple[str, str, str]] = {}
    if not path.is_file():
        return known
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#") or " exit=" in line:
            continue
        body, _, reason = line.partition("#")
        words = body.split()
        tags = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if len(words) != 3 or set(tags) != {"auditwheel", "ours"} or not reason.strip():
            raise SystemExit(f"{path}:{number}: expected 'FILE auditwheel=TAG ours=TAG # reason'")
        known[words[0]] = (tags["auditwheel"], tags["ours"], reason.strip())
    return known


def read_known_exits(path: Path) -> dict[str, tuple[int, str]]:
    """FILE -> (our exit status, the reason it differs from auditwheel's acceptance), from the
    lines ``FILE exit=N # reason``."""
    known: dict[str, tuple[int, str]] = {}
    if not path.is_file():
        return known
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        body, _, reason = line.partition("#")
        words = body.split()
        if len(words) != 2 or not words[1].startswith("exit="):
            continue
        if not reason.strip() or not words[1][5:].isdigit():
            raise SystemExit(f"{path}:{number}: expected 'FILE exit=N # reason'")
        known[words[0]] = (int(words[1][5:]), reason.strip())
    return known


def expected_exit(file: str, auditwheel: str | None) -> int | None:
    """0 when auditwheel's tag accepts every declared tag of its family (a wheel tagged for
    both libcs is judged by the family auditwheel judged), 6 when it does not, None when
    auditwheel gave no tag."""
    if auditwheel is None:
        return None
    sys.path.insert(0, str(ROOT))
    from wheels.policy.wheel_abi import pep600

    theirs = pep600(auditwheel)
    platforms = file[: -len(".whl")].rsplit("-", maxsplit=1)[-1].split(".")
    if theirs is None:  # linux_<arch>: no manylinux or musllinux tag is right
        return 6 if any(pep600(p) for p in platforms) else 0
    mine = [t for p in platforms if (t := pep600(p)) is not None and t[0] == theirs[0]]
    return 0 if mine and all(t[1] >= theirs[1] for t in mine) else 6


def measured(
    argv: Sequence[str], env: dict[str, str] | None, timeout: float
) -> tuple[subprocess.CompletedProcess[str] | None, float, int]:
    """(the run, None when it timed out; seconds; the peak in kB of the RSS summed over its
    process tree, sampled from /proc) of ``argv``, run under ``benchmarks/treepeak.py``."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "treepeak.py"), "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - start, 0
    lines = proc.stderr.splitlines()
    mark = next((x for x in reversed(lines) if x.startswith(TREEPEAK)), None)
    proc.stderr = "\n".join(x for x in lines if not x.startswith(TREEPEAK))
    if mark is None:
        return proc, time.perf_counter() - start, 0
    took, rss = mark.split()[1:3]
    return proc, float(took), int(rss)


# --- getting the wheels ----------------------------------------------------------------------


def download(entry: Entry, cache: Path) -> str | None:
    """Fetch the entry's exact file into ``cache`` unless it is there; None, or what failed."""
    target = cache / entry.file
    if target.is_file():
        return None
    pythons, abi, platforms = entry.file[: -len(".whl")].split("-")[-3:]
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    argv += ["--python-version", _python_version(pythons, abi)]
    argv += [a for p in _newest_first(platforms.split(".")) for a in ("--platform", p)]
    if entry.index:
        argv += ["--extra-index-url", entry.index]
    # ``===`` compares the version string itself: ``torch==2.13.0`` would also take the
    # 2.13.0+cpu build that a find-links directory may hold.
    name, _, version = entry.spec.partition("==")
    pin = f"{name}==={version.lstrip('=')}"
    proc = subprocess.run(
        [*argv, "-d", str(cache), pin], capture_output=True, text=True, check=False
    )
    if target.is_file():
        return None
    # pip's configuration (a find-links directory, a constraints file) may have offered another
    # build of that version, or none: then PyPI (and the entry's index) alone, once.
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        argv += ["--isolated", "-d", tmp, pin]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if (Path(tmp) / entry.file).is_file():
            (Path(tmp) / entry.file).replace(target)
            return None
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x and "[notice]" not in x]
    return f"pip download {entry.spec} did not give {entry.file}: {(lines or ['no output'])[-1]}"


def _newest_first(platforms: list[str]) -> list[str]:
    """The file's platform tags, the newest glibc first: pip ranks a candidate by the best of
    its tags, so a file that adds a newer alias (PyNaCl 1.5.0's ``manylinux_2_24``) wins over
    another build of the version without it."""
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}

    def glibc(tag: str) -> tuple[int, int]:
        parts = tag.split("_")
        if parts[0] in legacy:
            return legacy[parts[0]]
        return (int(parts[1]), int(parts[2])) if parts[0] == "manylinux" else (0, 0)

    return sorted(platforms, key=glibc, reverse=True)


def _python_version(tags: str, abi: str) -> str:
    """The interpreter version pip should pick the file for: its first ``cpXY`` tag, else this
    interpreter's (``py3``, ``py2.py3``), which an abi3 file's ``cpXY`` accepts too when this one
    is as new (``--python-version 3.9`` means 3.9.0, which ``Requires-Python: !=3.9.0`` refuses:
    cryptography 44)."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    for tag in tags.split("."):
        if tag.startswith("cp") and tag[2:].isdigit() and len(tag) >= 4:
            least = (int(tag[2]), int(tag[3:]))
            if abi == "abi3" and sys.version_info[:2] >= least:
                return here
            return f"{least[0]}.{least[1]}"
    return here


def default_cache() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    sys.path.insert(0, str(ROOT))
    from builder.core.layout import default_home

    return default_home(os.environ) / "differential-wheels"


# --- the two tools ---------------------------------------------------------------------------


def warm_page_cache(wheel: Path) -> None:
    with wheel.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def run_auditwheel(wheel: Path, timeout: float) -> tuple[str | None, str | None, float, int]:
    """(tag, error, seconds, peak RSS in kB) of ``auditwheel show --json``."""
    argv = [sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)]
    proc, seconds, peak = measured(argv, None, timeout)
    if proc is None:
        return None, f"timed out after {timeout:.0f} s", seconds, peak
    try:
        tag = json.loads(proc.stdout).get("overall_tag") if proc.returncode == 0 else None
    except (ValueError, AttributeError):
        tag = None
    if tag:
        return str(tag), None, seconds, peak
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return None, f"exit {proc.returncode}: {tail[0]}", seconds, peak


def ours_env(pycache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


@dataclass(frozen=True)
class Ours:
    """What one run of our audit said."""

    tag: str | None
    internal: str | None
    seconds: float
    exit: int | None = None
    peak: int = 0


def run_ours(wheel: Path, env: dict[str, str], timeout: float) -> Ours:
    """Our auditwheel_tag, internal error or crash, seconds, exit status and peak RSS of
    ``audit --json --no-cache``."""
    argv = [sys.executable, "-m", "builder", "audit", "--json", "--no-cache", str(wheel)]
    with tempfile.TemporaryDirectory(prefix="differential-home-") as home:
        fresh = {**env, "INFINI_STACK_HOME": home, "XDG_CACHE_HOME": home}
        proc, seconds, peak = measured(argv, fresh, timeout)
    if proc is None:
        return Ours(None, f"timed out after {timeout:.0f} s", seconds)
    tail = proc.stderr.strip().splitlines()[-1:] or ["no stderr"]
    try:
        report = json.loads(proc.stdout)["wheels"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return Ours(None, f"exit {proc.returncode}, no JSON: {tail[0]}", seconds, None, peak)
    internal = [e["message"] for e in report.get("errors", [])]
    if proc.returncode not in (AUDIT_OK, AUDIT_VIOLATIONS) or "Traceback" in proc.stderr:
        internal.append(f"exit {proc.returncode}: {tail[0]}")
    found = report.get("auditwheel_tag")
    return Ours(found, "; ".join(internal) or None, seconds, proc.returncode, peak)


# --- the run ---------------------------------------------------------------------------------


def audit_both(wheel: Path, env: dict[str, str], timeout: float) -> Result:
    warm_page_cache(wheel)
    theirs, error, t_theirs, rss_theirs = run_auditwheel(wheel, timeout)
    ours = run_ours(wheel, env, timeout)
    return Result(
        wheel.name,
        wheel.stat().st_size,
        theirs,
        ours.tag,
        t_theirs,
        ours.seconds,
        error,
        ours.internal,
        ours.exit,
        expected_exit(wheel.name, theirs),
        rss_theirs,
        ours.peak,
    )


def verdict(result: Result, known: dict[str, tuple[str, str, str]]) -> str:
    """``yes``, ``known`` (a listed difference), ``n/a`` (auditwheel gave no verdict) or ``NO``."""
    if result.agree is None:
        return "n/a"
    if result.agree:
        return "yes"
    listed = known.get(result.file)
    return "known" if listed and listed[:2] == (result.auditwheel, result.ours) else "NO"


def exit_verdict(result: Result, known: dict[str, tuple[int, str]]) -> str:
    """Our exit status against auditwheel's acceptance of the declared tags: ``yes``,
    ``known`` (listed with its reason), ``n/a`` (no verdict of auditwheel's) or ``NO``."""
    if result.exit_expected is None:
        return "n/a"
    if result.exit_ours == result.exit_expected:
        return "yes"
    listed = known.get(result.file)
    return "known" if listed and listed[0] == result.exit_ours else "NO"


def line(r: Result, said: str) -> str:
    """One wheel: both tags, the agreement, both times and auditwheel's over ours."""
    speedup = f"{r.speedup:6.1f}x" if r.speedup else "     -"
    notes = [f"INTERNAL {r.internal}"] if r.internal else []
    if r.auditwheel_error:
        notes.append(f"auditwheel: {r.auditwheel_error}")
    return (
        f"{r.file[:70]:70s} {r.size / 1e6:8.2f} MB  auditwheel={r.auditwheel or '-':24s} "
        f"ours={r.ours or '-':24s} agree={said:5s} t_auditwheel={r.t_auditwheel:6.2f} s "
        f"t_ours={r.t_ours:5.2f} s {speedup} exit={r.exit_ours} (expected {r.exit_expected}) "
        f"rss_auditwheel={r.rss_auditwheel / 1e3:5.0f} MB rss_ours={r.rss_ours / 1e3:5.0f} MB"
        + ("  " + " | ".join(notes) if notes else "")
    )


def exits_summary(results: Sequence[Result], exits: dict[str, str]) -> list[str]:
    """The exit statuses against auditwheel's acceptance, and both tools' peak RSS."""
    judged = [r for r in results if exits[r.file] != "n/a"]
    out = [
        f"exit status: ours as auditwheel's acceptance of the declared tags on "
        f"{sum(exits[r.file] == 'yes' for r in judged)} of {len(judged)} judged, "
        f"{sum(exits[r.file] == 'known' for r in judged)} known differences",
        *(
            f"  EXIT DIFFERS {r.file}: ours {r.exit_ours}, expected {r.exit_expected}"
            for r in judged
            if exits[r.file] == "NO"
        ),
    ]
    if results:
        top = max(results, key=lambda r: r.rss_ours)
        theirs = max(results, key=lambda r: r.rss_auditwheel)
        out.append(
            f"peak RSS (the process tree summed): ours {top.rss_ours / 1e3:.0f} MB ({top.file}), "
            f"median {statistics.median(r.rss_ours for r in results) / 1e3:.0f} MB; auditwheel "
            f"{theirs.rss_auditwheel / 1e3:.0f} MB ({theirs.file}), median "
            f"{statistics.median(r.rss_auditwheel for r in results) / 1e3:.0f} MB"
        )
    return out


def summary(results: Sequence[Result], said: dict[str, str], missing: Sequence[str]) -> list[str]:
    judged = [r for r in results if said[r.file] != "n/a"]
    out = [
        f"wheels: {len(results)} audited, {len(missing)} not obtained; the platform tag agrees on "
        f"{sum(said[r.file] == 'yes' for r in judged)} of {len(judged)} judged, "
        f"{sum(said[r.file] == 'known' for r in judged)} known differences",
        *(f"  NOT OBTAINED {m}" for m in missing),
        *(
            f"  DISAGREEMENT {r.file}: auditwheel {r.auditwheel}, ours {r.ours}"
            for r in judged
            if said[r.file] == "NO"
        ),
    ]
    broken = [r for r in results if r.internal]
    out.append(f"internal errors or crashes of our audit: {len(broken)}")
    out += [f"  {r.file}: {r.internal}" for r in broken]
    timed = [r for r in results if r.t_ours > 0]
    if timed:
        ours, theirs = sum(r.t_ours for r in timed), sum(r.t_auditwheel for r in timed)
        smallest = min(timed, key=lambda r: r.size)
        out += [
            f"time: auditwheel {theirs:.1f} s, ours {ours:.1f} s: aggregate ratio "
            f"{theirs / ours:.1f}x (sum of auditwheel's times over the sum of ours)",
            "median per-wheel ratio: "
            f"{statistics.median(r.t_auditwheel / r.t_ours for r in timed):.1f}x; "
            f"slowest relative: {min(timed, key=lambda r: r.t_auditwheel / r.t_ours).file}",
            f"smallest wheel {smallest.file} ({smallest.size / 1e3:.0f} kB): auditwheel "
            f"{smallest.t_auditwheel:.2f} s, ours {smallest.t_ours:.2f} s, "
            f"{smallest.t_auditwheel / smallest.t_ours:.1f}x",
        ]
    return out


def fetch_all(
    entries: Sequence[Entry], cache: Path, download_ok: bool
) -> tuple[list[Path], list[str]]:
    cache.mkdir(parents=True, exist_ok=True)
    wheels, missing = [], []
    for entry in entries:
        problem = download(entry, cache) if download_ok else None
        if (cache / entry.file).is_file():
            wheels.append(cache / entry.file)
        else:
            missing.append(problem or f"{entry.file}: not in {cache} (--no-download)")
    return wheels, missing


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=LIST, help="the pinned list")
    parser.add_argument("--known", type=Path, default=KNOWN, help="the known differences")
    parser.add_argument("--cache", type=Path, default=None, help="where the wheels are kept")
    parser.add_argument("--no-download", action="store_true", help="use the cache as it is")
    parser.add_argument("--only", action="append", default=[], help="wheel files containing this")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per tool and wheel")
    parser.add_argument("--json", type=Path, dest="json_out", help="write every result as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    entries = [
        e for e in read_list(args.wheels) if not args.only or any(s in e.file for s in args.only)
    ]
    known = read_known(args.known)
    known_exits = read_known_exits(args.known)
    wheels, missing = fetch_all(entries, args.cache or default_cache(), not args.no_download)
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    results: list[Result] = []
    said: dict[str, str] = {}
    exits: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="differential-pycache-") as pycache:
        env = ours_env(Path(pycache))
        if wheels:  # one untimed audit compiles every module it imports into the prefix
            run_ours(min(wheels, key=lambda p: p.stat().st_size), env, args.timeout)
        for wheel in wheels:
            results.append(audit_both(wheel, env, args.timeout))
            said[wheel.name] = verdict(results[-1], known)
            exits[wheel.name] = exit_verdict(results[-1], known_exits)
            print(line(results[-1], said[wheel.name]), flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end\n")
    print("\n".join([*summary(results, said, missing), *exits_summary(results, exits)]))
    stale = sorted(set(known) & {r.file for r in results if said[r.file] == "yes"})
    print("".join(f"note: {s} is listed as a known difference but now agrees\n" for s in stale))
    if args.json_out:
        rows = [asdict(r) | {"agree": said[r.file], "exit": exits[r.file]} for r in results]
        args.json_out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    failed = missing or any(
        said[r.file] == "NO" or exits[r.file] == "NO" or r.internal for r in results
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
