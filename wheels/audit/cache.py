"""The result cache: one JSON file per batch of members, keyed by the hash of the batch's
compressed bytes (plain data, no pickle: :func:`wheels.elf.to_record` and, for CUDA device code,
:func:`wheels.cuda.devicecode.to_record`)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.audit.members import MemberScan
from wheels.audit.raw import RawFile, Task
from wheels.elf import from_record, to_record

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from wheels.cuda.fatbin import DeviceCode

CACHE_VERSION = "infini-stack-audit-5"  # 5: export versions as indices (ElfInfo.export_versions)


@dataclass(frozen=True)
class Cache:
    """Batch results under ``root``, one JSON file per batch key."""

    root: Path

    def key(self, batch: Sequence[Task], raws: Sequence[bytes | memoryview | RawFile]) -> str:
        h = hashlib.sha256(CACHE_VERSION.encode())
        for task, raw in zip(batch, raws, strict=True):
            h.update(f"\0{task.name}\0{task.method}\0{task.file_size}\0{task.algo}\0".encode())
            raw_hash = hashlib.sha256()
            for part in raw.steps() if isinstance(raw, RawFile) else (raw,):
                raw_hash.update(part)
            h.update(raw_hash.digest())
        return h.hexdigest()

    def get(self, key: str, batch: Sequence[Task]) -> list[MemberScan] | None:
        try:
            data = json.loads((self.root / key[:2] / f"{key}.json").read_text(encoding="utf-8"))
            rows = data["members"]
            if data.get("version") != CACHE_VERSION or len(rows) != len(batch):
                return None
            return [_scan_from(task, row) for task, row in zip(batch, rows, strict=True)]
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            return None

    def put(self, key: str, scans: Sequence[MemberScan]) -> None:
        """Store the batch's scans; a cache that cannot be written is a miss next time."""
        rows = [_scan_to(s) for s in scans]
        target = self.root / key[:2] / f"{key}.json"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"version": CACHE_VERSION, "members": rows}, out)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except OSError:
            with suppress(OSError):
                os.unlink(tmp)


def _scan_to(scan: MemberScan) -> dict[str, object]:
    return {
        "size": scan.size,
        "digest": scan.digest,
        "elf_error": scan.elf_error,
        "not_elf_but_named": scan.not_elf_but_named,
        "elf": to_record(scan.elf) if scan.elf is not None else None,
        "device": _device_to(scan.device) if scan.device is not None else None,
        "device_error": scan.device_error,
    }


def _scan_from(task: Task, row: Mapping[str, object]) -> MemberScan:
    elf, device, device_error = row["elf"], row["device"], row["device_error"]
    size, digest, error = row["size"], row["digest"], row["elf_error"]
    if not isinstance(size, int) or not isinstance(digest, str):
        raise TypeError("bad cache row")
    return MemberScan(
        task.index,
        task.name,
        size,
        digest,
        task.algo,
        elf=from_record(elf) if isinstance(elf, dict) else None,
        elf_error=error if isinstance(error, str) else None,
        not_elf_but_named=bool(row["not_elf_but_named"]),
        device=_device_from(device) if isinstance(device, dict) else None,
        device_error=device_error if isinstance(device_error, str) else None,
    )


def _device_to(code: DeviceCode) -> dict[str, object]:
    from wheels.cuda import devicecode  # (only for a member with device code)

    return devicecode.to_record(code)


def _device_from(record: Mapping[str, object]) -> DeviceCode:
    from wheels.cuda import devicecode

    return devicecode.from_record(record)
