"""The content-addressed store: one entry per component build key, complete or absent.

An entry is assembled under ``.incoming/<key>`` and renamed to ``<key>`` with its record written
last, so a build killed at any moment leaves no partial entry: an entry exists exactly when its
``record.json`` does. A lock per key (kept with the store, so homes sharing a store share it)
keeps two processes from building the same entry; the second waits and then finds it done.
Removal renames the entry aside first, so it disappears as a whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from builder.core import contents
from builder.core.fs import atomic_write
from builder.core.layout import Layout
from builder.core.redact import redact_data

RECORD = "record.json"
DOOMED = ".doomed-"


@dataclass(frozen=True)
class Store:
    layout: Layout

    def has(self, key: str) -> bool:
        return (self.layout.entry(key) / RECORD).is_file()

    def record(self, key: str) -> dict[str, Any]:
        return read_record(self.layout.entry(key))

    @contextlib.contextmanager
    def lock(self, key: str, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        """Hold the entry lock of ``key``; ``on_wait`` hears who holds it when it is busy."""
        with file_lock(self.layout.entry_locks() / f"{entry_name(key)}.lock", on_wait=on_wait):
            yield

    def try_lock(self, name: str) -> contextlib.AbstractContextManager[bool]:
        """The entry lock of entry ``name`` if free now: yields False when someone holds it."""
        return try_file_lock(self.layout.entry_locks() / f"{name}.lock")

    def begin(self, key: str) -> Path:
        """A clean staging directory for ``key`` (leftovers of a killed build are removed).

        The caller holds the entry lock, so whatever is there belongs to nobody.
        """
        staging = self.layout.staging(key)
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        return staging

    def commit(self, key: str, record: dict[str, Any]) -> Path:
        """Write the install manifest, the record last, then rename the staged entry into place."""
        staging = self.layout.staging(key)
        items = contents.scan(staging / "prefix")
        record = {**record, "manifest": contents.write(staging, items)}
        write_record(staging, record)
        entry = self.layout.entry(key)
        if entry.exists():  # only possible without the key lock; keep the existing entry
            shutil.rmtree(staging)
            return entry
        staging.rename(entry)
        fsync_dir(entry.parent)
        return entry

    def verify(self, name: str) -> Verdict:
        """Entry ``name``'s prefix against its install manifest, every file hashed."""
        entry = self.layout.store_root / name
        try:
            record = read_record(entry)
        except (OSError, ValueError) as exc:
            return Verdict(name, "?", "?", "changed", problem=f"its record is unreadable ({exc})")
        verdict = functools.partial(
            Verdict, name, str(record.get("name")), str(record.get("vendor"))
        )
        try:
            items = contents.read(entry, record.get("manifest"))
        except (OSError, ValueError) as exc:
            return verdict("changed", problem=str(exc))
        if items is None:
            return verdict("unverifiable")
        differences = contents.compare(entry / "prefix", items)
        return verdict("changed" if differences else "ok", differences)

    def entries(self) -> list[str]:
        """Names (``key[:32]``) of the complete entries."""
        root = self.layout.store_root
        if not root.is_dir():
            return []
        return sorted(
            p.name for p in root.iterdir() if not p.name.startswith(".") and (p / RECORD).is_file()
        )

    def leftovers(self) -> list[Path]:
        """What killed builds and removals left behind: staging dirs and half-removed entries.

        Staging dirs may belong to a running build; check the entry lock before removing one.
        """
        root = self.layout.store_root
        if not root.is_dir():
            return []
        out = [p for p in root.iterdir() if p.name.startswith(DOOMED)]
        # A directory without a record can only appear by hand; it is no entry either.
        out += [
            p
            for p in root.iterdir()
            if not p.name.startswith(".") and p.is_dir() and not (p / RECORD).is_file()
        ]
        incoming = self.layout.incoming()
        if incoming.is_dir():
            out += list(incoming.iterdir())
        return sorted(out)

    def remove(self, name: str) -> None:
        """Remove entry ``name`` as a whole; the caller holds its lock."""
        remove_atomically(self.layout.store_root / name)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`Store.verify` found of one entry."""

    name: str  # the entry's directory name (key[:32])
    component: str
    vendor: str
    state: Literal["ok", "changed", "unverifiable"]
    differences: tuple[contents.Difference, ...] = ()
    problem: str = ""  # the manifest or record itself is damaged

    @property
    def ok(self) -> bool:
        return self.state != "changed"

    def lines(self) -> list[str]:
        """The entry, its component, and each path that differs (or what is damaged)."""
        head = f"store entry {self.name} ({self.component}, {self.vendor})"
        if self.state == "ok":
            return [f"{head}: ok"]
        if self.state == "unverifiable":
            return [f"{head}: unverifiable (made before install manifests; not checked)"]
        if self.problem:
            return [f"{head} is damaged: {self.problem}"]
        count = len(self.differences)
        return [
            f"{head} does not match its install manifest ({count} path{'s' * (count != 1)}):",
            *(f"  {d.line()}" for d in self.differences),
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.name,
            "component": self.component,
            "vendor": self.vendor,
            "state": self.state,
            "problem": self.problem or None,
            "differences": [d.to_json() for d in self.differences],
        }


def remove_atomically(entry: Path) -> None:
    """Rename ``entry`` aside (atomic: it disappears as a whole), then delete it."""
    doomed = entry.parent / f"{DOOMED}{entry.name}-{os.getpid()}"
    entry.rename(doomed)
    shutil.rmtree(doomed)


def entry_name(key: str) -> str:
    return key[:32]


def read_record(entry: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((entry / RECORD).read_text(encoding="utf-8"))
    return data


def write_record(directory: Path, record: dict[str, Any]) -> None:
    """Write ``record.json`` durably: a temporary file, fsync, rename."""
    text = json.dumps(redact_data(record), indent=2, sort_keys=True)
    atomic_write(directory / RECORD, text, durable=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def disk_usage(path: Path) -> int:
    """Bytes a tree occupies (allocated blocks, links not followed, hard links counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            try:
                info = (Path(dirpath) / name).lstat()
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    with contextlib.suppress(OSError):
        total += os.lstat(path).st_blocks * 512
    return total


# --- locks --------------------------------------------------------------------------------------


def lock_path(locks: Path, name: str) -> Path:
    digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    return locks / f"{digest}.lock"


@contextlib.contextmanager
def file_lock(path: Path, *, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock (flock), released by the kernel if the process dies.

    The holder writes its pid into the file so that a waiter can say whom it waits for.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        fd = handle.fileno()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            if on_wait is not None:
                handle.seek(0)
                on_wait(handle.read().strip() or "another process")
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"process {os.getpid()}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """The lock if nobody holds it; yields whether it was taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
