"""Content digests: of a file's bytes, and of a directory tree (what identifies a path source)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache"})


def tree_digest(root: Path) -> str:
    """A hash of a directory's contents: relative paths, executable bits, bytes; links by target."""
    h = hashlib.sha256()
    for rel, full in _walk(root):
        info = full.lstat()
        h.update(rel.encode() + b"\0")
        if stat.S_ISLNK(info.st_mode):
            h.update(b"L" + str(full.readlink()).encode())
        else:
            h.update(b"X" if info.st_mode & 0o111 else b"F")
            h.update(file_digest(full))
        h.update(b"\n")
    return h.hexdigest()


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            full = base / name
            yield full.relative_to(root).as_posix(), full


def file_digest(path: Path) -> bytes:
    """The SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()
