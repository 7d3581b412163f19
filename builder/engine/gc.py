"""Garbage collection of the store and the home: what no kept plan uses, and what killed builds
left.

The keys to keep are those of every vendor's plan of every given manifest (with and without
tests), computed on this host as ``build`` would. Kept too: the build directories and source
trees those plans use, and the logs their store entries' records (and the last run report) name.
Everything else in the store, build/, src/ and logs/ goes, except what a running build holds
(its entry or build-directory lock is taken, or its run's process is alive).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from builder.core.layout import Layout
from builder.engine.store import (
    DOOMED,
    Store,
    disk_usage,
    entry_name,
    lock_path,
    read_record,
    remove_atomically,
    try_file_lock,
)
from builder.plan import Plan

_RUN_PID = re.compile(r"-(\d+)$")


@dataclass
class Keep:
    entries: set[str] = field(default_factory=set)
    build_dirs: set[Path] = field(default_factory=set)
    source_trees: set[Path] = field(default_factory=set)

    def add(self, plan: Plan) -> None:
        for c in plan.components:
            self.entries.add(entry_name(c.key))
            self.build_dirs.add(c.build_dir)
            if c.test is not None:  # build --test's build beside the entry, kept for the next
                self.build_dirs.add(c.test.build_dir)
            self.source_trees.add(c.source_dir)


@dataclass(frozen=True)
class Doomed:
    path: Path
    what: str
    size: int
    lock: Path | None = None  # a lock that must be free to remove it
    entry: bool = False  # a store entry: renamed aside first, so it disappears as a whole


def collect(layout: Layout, keep: Keep) -> list[Doomed]:
    """Everything gc would remove, in a stable order."""
    return [
        *_store_items(layout, keep),
        *_dirs(layout.home / "build", keep.build_dirs, "build directory", layout),
        *_dirs(layout.home / "src", keep.source_trees, "source tree", None),
        *_logs(layout, keep),
    ]


def _store_items(layout: Layout, keep: Keep) -> list[Doomed]:
    store = Store(layout)
    out = []
    for name in store.entries():
        if name not in keep.entries:
            path = layout.store_root / name
            out.append(
                Doomed(
                    path,
                    f"store entry ({_entry_label(layout, name)})",
                    disk_usage(path),
                    layout.entry_locks() / f"{name}.lock",
                    entry=True,
                )
            )
    for path in store.leftovers():
        what, lock = "left by a killed build", None
        if path.parent == layout.incoming():
            lock = layout.entry_locks() / f"{path.name}.lock"
        elif path.name.startswith(DOOMED):
            what = "left by a killed removal"
        out.append(Doomed(path, f"store leftover ({what})", disk_usage(path), lock))
    return out


def _entry_label(layout: Layout, name: str) -> str:
    try:
        record = read_record(layout.store_root / name)
    except (OSError, ValueError):
        return "no record"
    return f"{record.get('name')}, {record.get('vendor')}"


def _dirs(root: Path, kept: set[Path], what: str, layout: Layout | None) -> list[Doomed]:
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.iterdir()):
        if path in kept or not path.is_dir():
            continue
        if "." in path.name:  # a checkout in progress (mkdtemp) or not ours: leave it
            continue
        lock = lock_path(layout.locks(), f"build:{path}") if layout else None
        out.append(Doomed(path, what, disk_usage(path), lock))
    return out


def _logs(layout: Layout, keep: Keep) -> list[Doomed]:
    logs = layout.home / "logs"
    if not logs.is_dir():
        return []
    used: set[str] = set()
    store = Store(layout)
    for name in store.entries():
        if name in keep.entries:
            try:
                record = read_record(layout.store_root / name)
            except (OSError, ValueError):
                continue
            used.update(_run_dirs(record.get("logs", {}).values(), logs))
    last = layout.runs() / "last.json"
    if last.is_file():
        try:
            report = json.loads(last.read_text(encoding="utf-8"))
        except ValueError:
            report = {}
        for c in report.get("components", []):
            used.update(_run_dirs(c.get("logs", {}).values(), logs))
    out = []
    for run in sorted(logs.iterdir()):
        if run.name in used or _running(run.name):
            continue
        out.append(Doomed(run, "logs of a run", disk_usage(run)))
    return out


def _run_dirs(paths: Iterable[object], logs: Path) -> set[str]:
    out = set()
    for p in paths:
        try:
            out.add(Path(str(p)).relative_to(logs).parts[0])
        except (ValueError, IndexError):
            continue
    return out


def _running(run_id: str) -> bool:
    """A run whose process is alive is still writing its logs."""
    match = _RUN_PID.search(run_id)
    if not match:
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove(item: Doomed) -> bool:
    """Remove ``item`` unless its lock is held; an entry disappears as a whole."""
    if item.lock is None:
        shutil.rmtree(item.path, ignore_errors=True)
        return True
    with try_file_lock(item.lock) as free:
        if not free:
            return False
        if item.entry:
            remove_atomically(item.path)
        else:
            shutil.rmtree(item.path, ignore_errors=True)
    return True
