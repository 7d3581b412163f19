"""What a sanitizer profile costs on the mini stack: a cold build and the runtime check, plain
against sanitized, as medians.

    python benchmarks/sanitize_cost.py [--builds 3] [--checks 5] [--jobs 2]
                                       [--profile address,undefined] [--vendor cpu]

Each build is ``infini-stack build --test`` of the bundled mini stack into a fresh home (no
compiler launcher, no memo: every component compiled and its tests run), the plain and the
sanitized profile in alternating rounds; each check is ``infini-stack check`` of the wheel the
last build of the profile made (installed into a fresh venv each time, the runtime preloaded
for the sanitized one). Prints one JSON object.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "mini-stack" / "stack.yaml"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def tool(*args: str) -> list[str]:
    return [sys.executable, "-m", "builder", *args]


def build_and_wheel(
    profile: str, vendor: str, jobs: int, home: Path, dist: Path
) -> tuple[float, Path]:
    """A cold ``build --test`` (timed), then the wheel from the store (not timed)."""
    env = {**os.environ, "INFINI_STACK_HOME": str(home)}
    common = ["-m", str(MANIFEST), "-V", vendor, "-j", str(jobs), "--sanitize", profile]
    seconds = timed(tool("build", "--test", "--launcher", "none", "--no-memo", *common), env)
    subprocess.run(
        tool("wheel", "--test", *common, "-o", str(dist)),
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("*.whl")
    return seconds, wheel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--checks", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--profile", default="address,undefined")
    parser.add_argument("--vendor", default="cpu")
    args = parser.parse_args()
    profiles = ("none", args.profile)
    builds: dict[str, list[float]] = {p: [] for p in profiles}
    wheels: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="sanitize-cost-") as tmp:
        for round_ in range(args.builds):
            for profile in profiles:
                where = Path(tmp) / f"{round_}-{profile.replace(',', '+')}"
                seconds, wheels[profile] = build_and_wheel(
                    profile, args.vendor, args.jobs, where / "home", where / "dist"
                )
                builds[profile].append(seconds)
        checks: dict[str, list[float]] = {p: [] for p in profiles}
        for _ in range(args.checks):
            for profile in profiles:
                argv = tool("check", str(wheels[profile]), "-m", str(MANIFEST))
                checks[profile].append(timed(argv, dict(os.environ)))
    result = {
        "vendor": args.vendor,
        "jobs": args.jobs,
        "cores": os.cpu_count(),
        "build_test_seconds": {p: round(statistics.median(v), 1) for p, v in builds.items()},
        "check_seconds": {p: round(statistics.median(v), 2) for p, v in checks.items()},
        "runs": {"builds": builds, "checks": checks},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
