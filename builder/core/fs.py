"""Files written whole or not at all: a reader never sees half of one."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, *, durable: bool = False) -> Path:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place.

    ``durable`` also fsyncs the file before the rename, so that after a crash ``path`` holds
    either the old contents or the new ones, never an empty file (store records need this).
    The parent directory is created when missing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with tmp.open("wb") as f:
            f.write(raw)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
