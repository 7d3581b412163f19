"""The content-addressed store: one entry per component build key, complete or absent.

An entry is assembled under ``.incoming/<key>`` and renamed to ``<key>`` with its record written
last, so a build killed at any moment leaves no partial entry. A lock per key keeps two
processes from building the same entry; the second waits and then finds it done.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.layout import Layout

RECORD = "record.json"


@dataclass(frozen=True)
class Store:
    layout: Layout

    def has(self, key: str) -> bool:
        return (self.layout.entry(key) / RECORD).is_file()

    def record(self, key: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.layout.entry(key) / RECORD).read_text())
        return data

    def begin(self, key: str) -> Path:
        """A clean staging directory for ``key`` (leftovers of a killed build are removed)."""
        staging = self.layout.staging(key)
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        return staging

    def commit(self, key: str, record: dict[str, Any]) -> Path:
        """Write the record last, then rename the staged entry into place."""
        staging = self.layout.staging(key)
        tmp = staging / (RECORD + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(record, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(staging / RECORD)
        entry = self.layout.entry(key)
        if entry.exists():  # only possible without the key lock; keep the existing entry
            shutil.rmtree(staging)
            return entry
        staging.rename(entry)
        _fsync_dir(entry.parent)
        return entry

    def entries(self) -> list[str]:
        root = self.layout.store_root
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / RECORD).is_file())

    def remove(self, name: str) -> None:
        entry = self.layout.store_root / name
        doomed = self.layout.store_root / f".doomed-{name}"
        entry.rename(doomed)  # atomic: the entry disappears as a whole
        shutil.rmtree(doomed)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(locks: Path, name: str) -> Iterator[None]:
    """An exclusive advisory lock (flock): released by the kernel if the process dies."""
    locks.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    with (locks / f"{digest}.lock").open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
