"""A failed release keeps what it made: ``DIR.failed`` beside the release directory.

The release directory is written whole or not at all, so a release that fails after its build
would otherwise throw away the wheels it built, the runtime check's output (the token ids) and
the logs. They are moved into a failed-run directory that the error names:

- ``release-report.json``: every stage's time, the stage that failed, its exit code, the error;
- what the staging directory held (``check.log`` ...);
- ``wheels/``: every wheel the run made (``first/``, ``second/`` for ``--verify`` ...);
- ``logs/``: the build logs of the components this run built, and ``build-report.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOG_STEPS = ("configure", "build", "test", "install")


def failed_dir(out: Path) -> Path:
    """``DIR.failed`` beside ``out``, or ``DIR.failed-N`` when an earlier failure is there."""
    candidate = out.with_name(f"{out.name}.failed")
    n = 2
    while candidate.exists():
        candidate = out.with_name(f"{out.name}.failed-{n}")
        n += 1
    return candidate


def keep(
    out: Path,
    report: Mapping[str, Any],
    *,
    staging: Path | None,
    work: Path | None,
    run: Mapping[str, Any] | None,
) -> Path:
    """Write the failed-run directory for the release to ``out``; returns it."""
    target = failed_dir(out)
    target.mkdir(parents=True)
    if staging is not None and staging.is_dir():
        for item in sorted(staging.iterdir()):
            shutil.move(str(item), target / item.name)
    if work is not None and work.is_dir():
        for wheel in sorted(work.rglob("*.whl")):
            where = target / "wheels" / wheel.parent.relative_to(work)
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheel, where / wheel.name)
    if run is not None:
        _keep_logs(run, target / "logs")
    (target / "release-report.json").write_text(
        json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8"
    )
    return target


def _keep_logs(run: Mapping[str, Any], logs: Path) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "build-report.json").write_text(
        json.dumps(run, indent=2, default=str) + "\n", encoding="utf-8"
    )
    for component in run.get("components", []):
        for step, path in (component.get("logs") or {}).items():
            source = Path(path)
            if source.is_file():
                shutil.copy2(source, logs / f"{component['name']}-{step}.log")
