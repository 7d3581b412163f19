"""The complete wheel audit: every ELF in a wheel, what it needs, where each need resolves.

One pass over the archive: each member is read raw from the zip, inflated once in bounded
steps while its RECORD hash is computed, and ELF members are decoded from the inflated parts in
memory (:mod:`wheels.elf`). Big wheels are spread over processes, largest members first.

Checks, per ELF: identity; each DT_NEEDED resolved through RUNPATH into the wheel, into another
distribution (which must be a Requires-Dist), to a manylinux system library or to a library the
vendor expects on the machine; the needs of another distribution's library that only the wheel
can make it find (:mod:`wheels.loading`); libpython absent (not needed, not linked in
statically); the extension's ``PyInit_<name>``; every undefined symbol bound by the libraries it
loads. Per wheel:
archive hygiene, RECORD, and the platform tag against auditwheel's rules (:mod:`wheels.policy`).
"""

from __future__ import annotations

import ast
import base64
import bisect
import contextlib
import csv
import hashlib
import json
import multiprocessing
import multiprocessing.context
import os
import pickle
import posixpath
import queue
import re
import stat
import tempfile
import threading
import time
import warnings
import zipfile
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from wheels.audit_report import (
    AuditStats,
    ElfKind,
    ElfReport,
    Finding,
    Need,
    Severity,
    SymbolCheck,
    WheelAudit,
    plural,
    render_text,
    shorten,
    to_json,
)
from wheels.elf import (
    ELF_MAGIC,
    ByteSource,
    Chunks,
    ElfError,
    ElfInfo,
    HostLibraries,
    from_record,
    looks_like_elf,
    read_elf,
    to_record,
)
from wheels.loading import ORIGIN, installed_copy, search_path, site_dirs, stranded_needs
from wheels.naming import EXTENSION_NAME, escaped_name, vendor_of_local
from wheels.policy import DistLib, VendorPolicy
from wheels.policy.lddtree import LIBPYTHON_RE, host_library_dirs
from wheels.policy.manylinux import manylinux_policies
from wheels.policy.python_api import PYTHON_CORE, STATIC_PYTHON_MIN, is_python_api
from wheels.policy.wheel_abi import TagVerdict, platform_verdict
from wheels.policy.wheeltools import wheel_platform

__all__ = [
    "WheelAudit",
    "audit_wheel",
    "default_cache_dir",
    "infer_vendor",
    "render_text",
    "to_json",
]

CACHE_VERSION = "infini-stack-audit-2"
MAX_MEMBER = 4 << 30  # larger members are reported, not inflated
INFLATE_STEP = 32 << 10  # compressed bytes per inflate call: bounded output, no giant join
ONE_SHOT_BELOW = 1 << 20  # members this small are inflated in one call
SNAPSHOT_ABOVE = 64 << 20  # members this big are not kept inflated, see _Inflated
SNAPSHOT_EVERY = 4 << 20
KEEP_PREFIX = 8 << 20
HASH_THREAD_ABOVE = 64 << 20  # members this big are hashed on a second thread, given a free core
BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 1024
SERIAL_BELOW = 16 << 20  # wheels that inflate to less than this are read in this process alone
HASHES = ("sha256", "sha384", "sha512")
LISTED_SYMBOLS = 200

_PY_SYMBOL = re.compile(r"^_?Py")
_PY_EXPORT = re.compile(r"\0(_?Py[^\0]*)")
_BARE_MODULE = re.compile(r"^(?P<mod>[A-Za-z_]\w*)\.so$")
_TOKEN = re.compile(r"\$(\{[A-Za-z_]+\}|[A-Za-z_]+)")
_SITE = "/\0site-packages"


def audit_wheel(
    path: Path,
    policy: VendorPolicy,
    *,
    cache_dir: Path | None = None,
    workers: int | None = None,
) -> WheelAudit:
    """Audit one wheel; never raises for anything the wheel contains or lacks.

    ``cache_dir`` enables the result cache there; ``workers`` defaults to the usable cores.
    """
    start = time.perf_counter()
    findings = _Findings(str(path))
    try:
        return _audit(Path(path), policy, cache_dir, workers or _cores(), findings, start)
    except Exception as exc:  # the safety net: a bug here must not become a traceback
        findings.violation(
            "internal", None, f"the audit stopped early: {type(exc).__name__}: {exc}"
        )
        return _empty(Path(path), policy, findings, start)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def infer_vendor(path: Path) -> str:
    """The vendor a wheel was built for, from its local version: ``+cu130`` -> nvidia; cpu (whose
    policy expects every library in the wheel) when the name says none."""
    try:
        _, version, _, _ = parse_wheel_filename(Path(path).name)
    except (InvalidWheelFilename, InvalidVersion):
        return "cpu"
    return vendor_of_local(str(version)) or "cpu"


def default_cache_dir(home: Path) -> Path:
    return home / "audit-cache"


# ---------------------------------------------------------------------------------------------
# findings


class _Findings:
    def __init__(self, wheel: str) -> None:
        self.wheel = wheel
        self.items: list[Finding] = []

    def add(self, severity: Severity, code: str, member: str | None, message: str) -> None:
        self.items.append(Finding(severity, code, self.wheel, member, message))

    def violation(self, code: str, member: str | None, message: str) -> None:
        self.add("violation", code, member, message)

    def warning(self, code: str, member: str | None, message: str) -> None:
        self.add("warning", code, member, message)


def _empty(path: Path, policy: VendorPolicy, findings: _Findings, start: float) -> WheelAudit:
    stats = AuditStats(0, 0, 0, 0, 0, 0, time.perf_counter() - start)
    return WheelAudit(
        path, policy.name, None, None, (), None, None, (), (), (), tuple(findings.items), stats
    )


# ---------------------------------------------------------------------------------------------
# reading members: raw bytes from the zip, inflated once, hashed, ELF decoded


@dataclass(frozen=True)
class _Task:
    index: int
    name: str
    raw_name: bytes
    offset: int
    compress_size: int
    file_size: int
    method: int
    flags: int
    algo: str


@dataclass(frozen=True)
class MemberScan:
    """One member after one pass: its size and hash, and its ELF data when it is an ELF file."""

    index: int
    name: str
    size: int | None = None
    digest: str | None = None
    algo: str = "sha256"
    elf: ElfInfo | None = None
    elf_error: str | None = None
    not_elf_but_named: bool = False
    read_error: str | None = None


class _MemberError(Exception):
    pass


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        try:
            chunk = os.pread(fd, min(size, 1 << 30), offset)
        except (OSError, ValueError, OverflowError) as exc:
            raise _MemberError(f"cannot read {size} bytes at offset {offset}: {exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _read_raw(fd: int, task: _Task) -> bytes:
    """The member's compressed bytes, after checking its local header against the directory."""
    guess = 30 + len(task.raw_name) + 64
    small = task.compress_size <= ONE_SHOT_BELOW
    head = _pread(fd, guess + (task.compress_size if small else 0), task.offset)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise _MemberError(f"no local file header at offset {task.offset}")
    name_len = int.from_bytes(head[26:28], "little")
    extra_len = int.from_bytes(head[28:30], "little")
    if head[30 : 30 + name_len] != task.raw_name:
        local = head[30 : 30 + name_len].decode("utf-8", "replace")
        raise _MemberError(f"the local header names {local!r}, the central directory another file")
    start = 30 + name_len + extra_len
    if small and start <= guess:  # one read for header and data: most members are small
        raw = head[start : start + task.compress_size]
    else:
        raw = _pread(fd, task.compress_size, task.offset + start)
    if len(raw) != task.compress_size:
        raise _MemberError(f"truncated: {len(raw)} of {task.compress_size} compressed bytes")
    return raw


class _Digest:
    """Hashes parts as they come; a big member's are hashed on a helper thread, beside inflating."""

    def __init__(self, algo: str, background: bool) -> None:
        self.hasher = hashlib.new(algo)
        self.size = 0
        self.queue: queue.SimpleQueue[bytes | None] | None = None
        self.thread: threading.Thread | None = None
        if background:
            self.queue = queue.SimpleQueue()
            self.thread = threading.Thread(target=self._drain, name="audit-hash", daemon=True)
            self.thread.start()

    def add(self, part: bytes) -> None:
        self.size += len(part)
        if self.queue is not None:
            self.queue.put(part)
        else:
            self.hasher.update(part)

    def _drain(self) -> None:
        assert self.queue is not None
        while (part := self.queue.get()) is not None:
            self.hasher.update(part)

    def finish(self) -> str:
        if self.queue is not None and self.thread is not None:
            self.queue.put(None)
            self.thread.join()
        return base64.urlsafe_b64encode(self.hasher.digest()).rstrip(b"=").decode()


def _inflate(task: _Task, raw: bytes, path: Path, spare_core: bool) -> tuple[ByteSource, str]:
    """The member's content and its RECORD-style digest; bounded by the stated size."""
    if task.flags & 1:
        raise _MemberError("encrypted member")
    if task.file_size > MAX_MEMBER:
        raise _MemberError(f"states {task.file_size} bytes, more than this audit inflates")
    digest = _Digest(task.algo, background=spare_core and task.file_size >= HASH_THREAD_ABOVE)
    try:
        content: ByteSource
        if task.method == zipfile.ZIP_STORED:
            content = Chunks([raw])
            digest.add(raw)
        elif task.method == zipfile.ZIP_DEFLATED and len(raw) <= ONE_SHOT_BELOW:
            data = _inflate_small(task, raw)
            content = Chunks([data])
            digest.add(data)
        elif task.method == zipfile.ZIP_DEFLATED:
            content = _inflate_stream(task, raw, digest)
        else:
            data = _inflate_other(task, path)
            content = Chunks([data])
            digest.add(data)
    finally:
        value = digest.finish()
    if digest.size != task.file_size:
        raise _MemberError(f"holds {digest.size} bytes, the zip directory says {task.file_size}")
    return content, value


def _inflate_small(task: _Task, raw: bytes) -> bytes:
    # Small enough that even a bomb (deflate expands at most 1032:1) stays affordable.
    try:
        return zlib.decompress(raw, -15, max(1, min(task.file_size, len(raw) * 1032)))
    except zlib.error as exc:
        raise _MemberError(f"corrupt deflate data: {exc}") from None


@dataclass(frozen=True)
class _Point:
    """An inflater state to resume from: ``out`` bytes produced after ``inp`` bytes consumed."""

    out: int
    inp: int
    state: zlib._Decompress


class _Inflated:
    """A big member read without keeping it: its first bytes, and states to re-inflate from.

    Keeping every inflated byte of a 434 MB library costs more in fresh memory than the audit
    needs; the few ranges it reads past the kept prefix (the dynamic segment, notes, section
    headers) are inflated again from the nearest saved state.
    """

    def __init__(self, raw: bytes, prefix: bytes, points: list[_Point], size: int) -> None:
        self.raw, self.prefix, self.points, self.size = raw, prefix, points, size
        self._outs = [p.out for p in points]
        self._blocks: dict[int, bytes] = {}

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))

    def range(self, offset: int, size: int) -> memoryview:
        if size <= 0:  # as Chunks.range; at a saved state's offset no block would be read
            return memoryview(b"")
        if offset + size <= len(self.prefix):
            return memoryview(self.prefix)[offset : offset + size]
        first = bisect.bisect_right(self._outs, offset) - 1
        last = bisect.bisect_left(self._outs, offset + size)
        blocks = [self._block(k) for k in range(first, last)]
        data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        start = offset - self.points[first].out
        return memoryview(data)[start : start + size]

    def _block(self, k: int) -> bytes:
        if k not in self._blocks:
            point = self.points[k]
            end = self.points[k + 1].out if k + 1 < len(self.points) else self.size
            inflater, pos, out = point.state.copy(), point.inp, point.out
            parts: list[bytes] = []
            view = memoryview(self.raw)
            while out < end and pos < len(self.raw):
                part = inflater.decompress(view[pos : pos + INFLATE_STEP])
                pos += INFLATE_STEP
                parts.append(part)
                out += len(part)
            self._blocks[k] = b"".join(parts)[: end - point.out]
        return self._blocks[k]


def _inflate_stream(task: _Task, raw: bytes, digest: _Digest) -> ByteSource:
    """Inflate in bounded steps, hashing as it goes; keep all of it, or for big members only a
    prefix and a saved state every few megabytes."""
    keep_all = task.file_size < SNAPSHOT_ABOVE
    inflater = zlib.decompressobj(-15)
    view = memoryview(raw)
    parts: list[bytes] = []
    points = [_Point(0, 0, inflater.copy())]
    kept = 0
    try:
        for start in range(0, len(raw), INFLATE_STEP):
            part = inflater.decompress(view[start : start + INFLATE_STEP])
            if digest.size + len(part) > task.file_size:
                raise _MemberError(f"inflates past the {task.file_size} bytes it states")
            if keep_all or kept < KEEP_PREFIX:
                parts.append(part)
                kept += len(part)
            digest.add(part)
            if not keep_all and digest.size >= points[-1].out + SNAPSHOT_EVERY:
                points.append(_Point(digest.size, start + INFLATE_STEP, inflater.copy()))
        tail = inflater.flush()
    except zlib.error as exc:
        raise _MemberError(f"corrupt deflate data: {exc}") from None
    if tail:
        parts.append(tail)
        digest.add(tail)
    if not inflater.eof:
        raise _MemberError("deflate data ends early (truncated member)")
    if keep_all:
        return Chunks(parts)
    return _Inflated(raw, b"".join(parts), points, digest.size)


def _inflate_other(task: _Task, path: Path) -> bytes:
    # bzip2 and lzma are legal zip methods that wheels hardly use: let zipfile read them.
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.infolist()[task.index]
            with zf.open(info) as member:
                data = member.read(task.file_size + 1)
    except (
        zipfile.BadZipFile,
        NotImplementedError,
        OSError,
        EOFError,
        ValueError,
        RuntimeError,
        IndexError,
        zlib.error,
    ) as exc:
        raise _MemberError(f"cannot read (compression method {task.method}): {exc}") from None
    return data


def _scan_member(
    task: _Task, raw: bytes | _MemberError, path: Path, spare_core: bool
) -> MemberScan:
    if isinstance(raw, _MemberError):
        return MemberScan(task.index, task.name, algo=task.algo, read_error=str(raw))
    try:
        content, digest = _inflate(task, raw, path, spare_core)
    except _MemberError as exc:
        return MemberScan(task.index, task.name, algo=task.algo, read_error=str(exc))
    head = content.head(4)
    base = MemberScan(task.index, task.name, content.size, digest, task.algo)
    if not looks_like_elf(task.name, head):
        return base
    if head != ELF_MAGIC:
        return _replace(base, not_elf_but_named=True)
    try:
        return _replace(base, elf=read_elf(content))
    except ElfError as exc:
        return _replace(base, elf_error=str(exc))


def _replace(scan: MemberScan, **changes: object) -> MemberScan:
    values = {**scan.__dict__, **changes}
    return MemberScan(**values)


# The cache: one JSON file per batch, keyed by the hash of the batch's compressed bytes.


@dataclass(frozen=True)
class _Cache:
    root: Path

    def key(self, batch: Sequence[_Task], raws: Sequence[bytes]) -> str:
        h = hashlib.sha256(CACHE_VERSION.encode())
        for task, raw in zip(batch, raws, strict=True):
            h.update(f"\0{task.name}\0{task.method}\0{task.file_size}\0{task.algo}\0".encode())
            h.update(hashlib.sha256(raw).digest())
        return h.hexdigest()

    def get(self, key: str, batch: Sequence[_Task]) -> list[MemberScan] | None:
        try:
            data = json.loads((self.root / key[:2] / f"{key}.json").read_text(encoding="utf-8"))
            rows = data["members"]
            if data.get("version") != CACHE_VERSION or len(rows) != len(batch):
                return None
            return [_scan_from(task, row) for task, row in zip(batch, rows, strict=True)]
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            return None

    def put(self, key: str, scans: Sequence[MemberScan]) -> None:
        rows = [_scan_to(s) for s in scans]
        target = self.root / key[:2] / f"{key}.json"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"version": CACHE_VERSION, "members": rows}, out)
            Path(tmp).replace(target)
        except OSError:
            return  # a cache that cannot be written is a cache miss next time, nothing worse


def _scan_to(scan: MemberScan) -> dict[str, object]:
    return {
        "size": scan.size,
        "digest": scan.digest,
        "elf_error": scan.elf_error,
        "not_elf_but_named": scan.not_elf_but_named,
        "elf": to_record(scan.elf) if scan.elf is not None else None,
    }


def _scan_from(task: _Task, row: Mapping[str, object]) -> MemberScan:
    elf = row["elf"]
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
    )


def _run_batch(
    path: Path, batch: Sequence[_Task], cache: _Cache | None, spare_core: bool = False
) -> tuple[list[MemberScan], bool]:
    raws: list[bytes | _MemberError] = []
    try:
        with path.open("rb") as fh:
            for task in batch:
                try:
                    raws.append(_read_raw(fh.fileno(), task))
                except _MemberError as exc:
                    raws.append(exc)
    except OSError as exc:
        raws += [_MemberError(f"cannot open the wheel: {exc}")] * (len(batch) - len(raws))
    good = [r for r in raws if isinstance(r, bytes)]
    key = cache.key(batch, good) if cache is not None and len(good) == len(raws) else None
    if key is not None and cache is not None:
        hit = cache.get(key, batch)
        if hit is not None:
            return hit, True
    scans = [
        _scan_member(task, raw, path, spare_core) for task, raw in zip(batch, raws, strict=True)
    ]
    if key is not None and cache is not None and not any(s.read_error for s in scans):
        cache.put(key, scans)
    return scans, False


def _run_batches(
    path: Path, batches: Sequence[Sequence[_Task]], cache: _Cache | None, spare_core: bool
) -> list[tuple[list[MemberScan], bool]]:
    return [_run_batch(path, b, cache, spare_core) for b in batches]


def _batches(tasks: Sequence[_Task]) -> list[list[_Task]]:
    """Big members alone, small ones together; largest first so that the long ones start early."""
    batches: list[list[_Task]] = []
    current: list[_Task] = []
    size = 0
    for task in sorted(tasks, key=lambda t: t.file_size, reverse=True):
        if task.file_size >= BATCH_BYTES:
            batches.append([task])
            continue
        current.append(task)
        size += task.file_size
        if size >= BATCH_BYTES or len(current) >= BATCH_MEMBERS:
            batches.append(current)
            current, size = [], 0
    if current:
        batches.append(current)
    return batches


def _scan(
    path: Path,
    tasks: Sequence[_Task],
    cache: _Cache | None,
    workers: int,
    meanwhile: Callable[[], None] = lambda: None,
    while_waiting: Callable[[], None] = lambda: None,
) -> tuple[list[MemberScan], int, int]:
    """Read every member once: here, and in ``workers - 1`` child processes for big wheels.

    Processes rather than threads: inflating one 434 MB member takes thousands of short calls,
    each of which would wait for the GIL behind threads busy with small members.
    """
    batches = _batches(tasks)
    total = sum(t.file_size for t in tasks)
    if workers <= 1 or total < SERIAL_BELOW or len(batches) < 2:
        meanwhile()
        results = _run_batches(path, batches, cache, spare_core=workers > 1)
    else:
        results = _scan_parallel(path, batches, cache, workers, meanwhile, while_waiting)
    scans = sorted((s for batch, _ in results for s in batch), key=lambda s: s.index)
    return scans, sum(hit for _, hit in results), len(batches)


def _scan_parallel(
    path: Path,
    batches: Sequence[Sequence[_Task]],
    cache: _Cache | None,
    workers: int,
    meanwhile: Callable[[], None],
    while_waiting: Callable[[], None],
) -> list[tuple[list[MemberScan], bool]]:
    """Children take batches from the large end, one at a time; this process from the small end.

    The largest members go to children, whose inflate loops never wait for a GIL held by this
    process's bookkeeping; a batch is handed out only when a child is free, so none is left
    queued behind a long one while this process has nothing to do.
    """
    children = workers - 1
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() in a process with threads; we start none.
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = ProcessPoolExecutor(max_workers=children, mp_context=_mp_context())
    except (OSError, ValueError, RuntimeError):
        meanwhile()
        return _run_batches(path, batches, cache, spare_core=False)
    todo = deque(batches)
    handed: list[tuple[Sequence[_Task], Future[tuple[list[MemberScan], bool]]]] = []
    results: list[tuple[list[MemberScan], bool]] = []

    def feed() -> None:
        while todo and sum(not f.done() for _, f in handed) < children:
            batch = todo.popleft()
            # The first (largest) batch outlasts the rest: its hashing can use this core later.
            spare = not handed
            handed.append((batch, pool.submit(_run_batch, path, batch, cache, spare)))

    with pool, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with contextlib.suppress(OSError, RuntimeError, BrokenProcessPool):
            feed()  # without a child, everything is read here
        meanwhile()
        while todo:
            results.append(_run_batch(path, todo.pop(), cache))
            with contextlib.suppress(OSError, RuntimeError, BrokenProcessPool):
                feed()
        if not all(f.done() for _, f in handed):
            while_waiting()
        for batch, future in handed:
            try:
                results.append(future.result())
            except (BrokenProcessPool, OSError, EOFError, pickle.PickleError):
                results.append(_run_batch(path, batch, cache))
    return results


def _mp_context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


# ---------------------------------------------------------------------------------------------
# the archive: hygiene, dist-info, RECORD


@dataclass
class _Archive:
    path: Path
    zf: zipfile.ZipFile
    infos: list[zipfile.ZipInfo]
    distribution: str | None = None
    version: Version | None = None
    file_tags: tuple[str, ...] = ()
    dist_info: str | None = None
    data_dir: str | None = None
    wheel_tags: tuple[str, ...] = ()
    root_is_purelib: bool = False
    requires: list[Requirement] = field(default_factory=list)
    record: dict[str, tuple[str, str]] = field(default_factory=dict)
    record_order: list[str] = field(default_factory=list)


def _open(path: Path, f: _Findings) -> _Archive | None:
    if not path.exists():
        f.violation("missing", None, "no such file")
        return None
    if not path.is_file():
        f.violation("not-a-file", None, "not a regular file")
        return None
    try:
        zf = zipfile.ZipFile(path)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        ValueError,
        EOFError,
        OverflowError,
        UnicodeDecodeError,
        NotImplementedError,
        IndexError,
        KeyError,
    ) as exc:
        f.violation("not-a-zip", None, f"not a readable zip archive: {exc}")
        return None
    return _Archive(path, zf, zf.infolist())


def _check_names(archive: _Archive, f: _Findings) -> None:
    counts = Counter(i.filename for i in archive.infos)
    reported: set[str] = set()
    for info in archive.infos:
        name = info.filename
        parts = name.split("/")
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
            f.violation("absolute-name", name, "member name is an absolute path")
        if ".." in parts:
            f.violation("dotdot-name", name, "member name climbs out of the install root ('..')")
        if "\\" in name or "\0" in info.orig_filename:
            f.violation("odd-name", name, "member name holds a backslash or a NUL byte")
        if counts[name] > 1 and name not in reported:
            f.violation("duplicate", name, f"member appears {counts[name]} times in the archive")
            reported.add(name)
        squashed = posixpath.normpath(name) + ("/" if name.endswith("/") else "")
        if squashed != name and squashed in counts:
            f.violation("duplicate", name, f"member names the same file as {squashed!r}")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            f.violation("symlink", name, "member is a symbolic link")
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            f.violation("special-file", name, f"member is a special file (mode {oct(mode)})")


def _is_member_file(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return not info.is_dir() and not stat.S_ISLNK(mode)


def _read_metadata(archive: _Archive, f: _Findings) -> None:
    try:
        name, version, _build, tags = parse_wheel_filename(archive.path.name)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        f.violation("bad-filename", None, f"not a wheel file name: {exc}")
        name, version, tags = None, None, frozenset()
    archive.distribution, archive.version = name, version
    archive.file_tags = tuple(sorted({t.platform for t in tags}))
    tops = sorted({i.filename.split("/", 1)[0] for i in archive.infos if "/" in i.filename})
    dist_infos = [t for t in tops if t.endswith(".dist-info")]
    if not dist_infos:
        f.violation("no-dist-info", None, "no .dist-info directory: this zip is not a wheel")
        return
    matching = [d for d in dist_infos if name and version and _names(d, name, version)]
    archive.dist_info = (matching or dist_infos)[0]
    if name and version and not matching:
        f.violation(
            "dist-info-name",
            archive.dist_info,
            f"the .dist-info directory should be {escaped_name(name)}-{version}.dist-info",
        )
    if len(dist_infos) > 1:
        f.violation(
            "dist-info-name", None, "several .dist-info directories: " + ", ".join(dist_infos)
        )
    archive.data_dir = archive.dist_info[: -len(".dist-info")] + ".data"
    zf = archive.zf
    _read_wheel_file(archive, _small(zf, f"{archive.dist_info}/WHEEL", f), f)
    _read_metadata_file(archive, _small(zf, f"{archive.dist_info}/METADATA", f), f)
    _read_record(archive, _small(zf, f"{archive.dist_info}/RECORD", f), f)


def _names(dist_info: str, name: str, version: Version) -> bool:
    """Does ``NAME-VERSION.dist-info`` name this distribution (as pip compares them)?"""
    stem, _, raw_version = dist_info[: -len(".dist-info")].rpartition("-")
    try:
        return canonicalize_name(stem) == name and Version(raw_version) == version
    except InvalidVersion:
        return False


def _small(zf: zipfile.ZipFile, member: str, f: _Findings) -> str | None:
    try:
        info = zf.getinfo(member)
    except KeyError:
        f.violation("missing-metadata", member, "missing")
        return None
    if info.file_size > 64 << 20:
        f.violation("metadata-too-large", member, f"{info.file_size} bytes")
        return None
    try:
        return zf.read(info).decode("utf-8")
    except (
        zipfile.BadZipFile,
        OSError,
        ValueError,
        EOFError,
        NotImplementedError,
        zlib.error,
        RuntimeError,
    ) as exc:
        f.violation("unreadable-metadata", member, f"cannot read: {exc}")
        return None


def _read_wheel_file(archive: _Archive, text: str | None, f: _Findings) -> None:
    if text is None:
        return
    msg = Parser().parsestr(text)
    member = f"{archive.dist_info}/WHEEL"
    if not (msg.get("Wheel-Version") or "").startswith("1."):
        f.violation(
            "wheel-version", member, f"Wheel-Version {msg.get('Wheel-Version')!r}, expected 1.x"
        )
    archive.root_is_purelib = (msg.get("Root-Is-Purelib") or "").strip().lower() == "true"
    platforms = []
    for tag in msg.get_all("Tag") or []:
        pieces = tag.strip().split("-")
        if len(pieces) != 3:
            f.violation("wheel-tag", member, f"malformed Tag {tag!r}")
            continue
        platforms.append(pieces[2])
    archive.wheel_tags = tuple(sorted(set(platforms)))
    if archive.file_tags and set(archive.wheel_tags) != set(archive.file_tags):
        f.violation(
            "wheel-tag",
            member,
            "Tag lines ({}) disagree with the file name ({})".format(
                ", ".join(archive.wheel_tags) or "none", ", ".join(archive.file_tags)
            ),
        )


def _read_metadata_file(archive: _Archive, text: str | None, f: _Findings) -> None:
    if text is None:
        return
    member = f"{archive.dist_info}/METADATA"
    msg = Parser().parsestr(text)
    name = msg.get("Name")
    if archive.distribution and (not name or canonicalize_name(name) != archive.distribution):
        f.warning("metadata-name", member, f"Name {name!r} differs from the file name")
    for value in msg.get_all("Requires-Dist") or []:
        try:
            archive.requires.append(Requirement(value))
        except InvalidRequirement as exc:
            f.violation("requires-dist", member, f"invalid Requires-Dist {value!r}: {exc}")


def _read_record(archive: _Archive, text: str | None, f: _Findings) -> None:
    if text is None:
        return
    member = f"{archive.dist_info}/RECORD"
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        f.violation("record", member, f"not CSV: {exc}")
        return
    for number, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != 3:
            f.violation("record", member, f"row {number} has {len(row)} fields, not 3")
            continue
        path, digest, size = row
        if path in archive.record:
            f.violation("record", member, f"row {number} lists {path} a second time")
        archive.record[path] = (digest, size)
        archive.record_order.append(path)


def _rehash(archive: _Archive, path: Path, scans: list[MemberScan]) -> list[MemberScan]:
    """Members hashed with sha256 whose RECORD rows name another accepted algorithm."""
    out = []
    for scan in scans:
        algo = _record_algo(archive, scan.name)
        if algo == scan.algo or scan.read_error:
            out.append(scan)
            continue
        task = _task(scan.index, archive.infos[scan.index], algo)
        with path.open("rb") as fh:
            try:
                _, digest = _inflate(task, _read_raw(fh.fileno(), task), path, False)
            except _MemberError as exc:
                out.append(_replace(scan, read_error=str(exc)))
                continue
        out.append(_replace(scan, digest=digest, algo=algo))
    return out


def _record_algo(archive: _Archive, name: str) -> str:
    algo = archive.record.get(name, ("", ""))[0].partition("=")[0]
    return algo if algo in HASHES else "sha256"


def _check_record(archive: _Archive, scans: Sequence[MemberScan], f: _Findings) -> None:
    if archive.dist_info is None or not archive.record:
        return
    own = f"{archive.dist_info}/RECORD"
    unsigned = {own, f"{own}.jws", f"{own}.p7s"}
    present = {i.filename for i in archive.infos if not i.is_dir()}
    for name in sorted(present - set(archive.record) - unsigned):
        f.violation("record", name, "not listed in RECORD")
    for name in sorted(set(archive.record) - present):
        f.violation("record", name, "listed in RECORD but not in the wheel")
    for scan in scans:
        if scan.name in unsigned or scan.name not in archive.record:
            continue
        digest, size = archive.record[scan.name]
        algo, _, value = digest.partition("=")
        if not digest:
            f.violation("record", scan.name, "RECORD gives no hash")
        elif algo not in HASHES:
            f.violation(
                "record", scan.name, f"RECORD uses hash {algo!r}; sha256 or stronger is required"
            )
        elif scan.digest is not None and value != scan.digest:
            f.violation("record-hash", scan.name, f"content does not match its RECORD {algo}")
        if scan.size is not None and size != str(scan.size):
            f.violation(
                "record-size",
                scan.name,
                f"RECORD says {size or 'no'} bytes, the member has {scan.size}",
            )


# ---------------------------------------------------------------------------------------------
# the ELF files: resolution, libpython, entry points, symbols


@dataclass
class _Elves:
    """Everything the per-ELF checks need about the wheel."""

    policy: VendorPolicy
    elfs: dict[str, ElfInfo]
    install_of: dict[str, str | None]
    installed: dict[str, str]
    requires: Mapping[str, list[Requirement]]
    whitelist: frozenset[str]
    host: HostLibraries
    site_dirs: tuple[Path, ...]
    arch: str | None
    needs: dict[str, tuple[Need, ...]] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)
    rpath_dirs: dict[str, list[str]] = field(default_factory=dict)
    runpath_dirs: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, _Group] = field(default_factory=dict)
    definers: dict[tuple[str, str], ElfInfo] = field(default_factory=dict)


def _install_path(archive: _Archive, name: str) -> str | None:
    """Where a member lands relative to site-packages; None for scripts, headers and data."""
    if archive.data_dir and name.startswith(archive.data_dir + "/"):
        _, category, rest = [*name.split("/", 2), "", ""][:3]
        return rest if category in ("purelib", "platlib") and rest else None
    return name


def _elf_kind(ctx: _Elves, member: str, info: ElfInfo) -> ElfKind:
    if member in ctx.extensions:
        return "extension"
    return "executable" if info.elf_type == 2 or info.interpreter else "library"


def _extension_module(install: str | None, installed: Mapping[str, str]) -> str | None:
    if install is None:
        return None
    directory, base = posixpath.split(install)
    if m := EXTENSION_NAME.match(base):
        return m.group("mod")
    m = _BARE_MODULE.match(base)
    in_package = not directory or posixpath.join(directory, "__init__.py") in installed
    if m and in_package and not m.group("mod").startswith("lib"):
        return m.group("mod")
    return None


def _runpath_dir(entry: str, origin: str | None) -> tuple[str | None, str | None]:
    """(site-packages-relative dir, problem) for one RUNPATH/RPATH entry."""
    if entry == "":
        return None, "an empty entry, which means the current directory"
    tokens = [t.strip("{}") for t in _TOKEN.findall(entry)]
    if any(t != "ORIGIN" for t in tokens):
        return None, f"'{entry}' uses a token this audit cannot evaluate"
    if tokens:
        if origin is None:
            return None, None
        expanded = posixpath.normpath(ORIGIN.sub(f"{_SITE}/{origin}".rstrip("/"), entry))
        if expanded == _SITE:
            return "", None
        if expanded.startswith(_SITE + "/"):
            return expanded[len(_SITE) + 1 :], None
        return None, f"'{entry}' leads out of site-packages"
    if entry.startswith("/"):
        return (
            None,
            f"'{entry}' is an absolute path outside the wheel (a build or toolkit directory?)",
        )
    return None, f"'{entry}' is relative to the current directory"


def _check_runpaths(ctx: _Elves, member: str, info: ElfInfo, f: _Findings) -> None:
    """Judge every RUNPATH/RPATH entry once, and keep the directories inside site-packages."""
    install = ctx.install_of.get(member)
    origin = posixpath.dirname(install) if install is not None else None
    for which in ("runpath", "rpath"):
        dirs: list[str] = []
        for entry in info.split_path(which):
            where, problem = _runpath_dir(entry, origin)
            if problem:
                f.violation("runpath", member, f"{which.upper()} {problem}")
            elif where is not None and where not in dirs:
                dirs.append(where)
        if which == "rpath":
            ctx.rpath_dirs[member] = dirs
        elif info.runpath is not None:
            ctx.runpath_dirs[member] = dirs


def _context_dirs(ctx: _Elves, member: str, chain: Sequence[str]) -> list[str]:
    """glibc's order: the object's RUNPATH alone, else the RPATHs of it and of its loaders."""
    own = ctx.runpath_dirs.get(member)
    if own is not None:
        return own
    dirs: list[str] = []
    for loader in reversed(chain):
        dirs += [d for d in ctx.rpath_dirs.get(loader, ()) if d not in dirs]
    return dirs


def _requires_covers(ctx: _Elves, distribution: str, arch: str | None) -> bool:
    env = {"extra": "", "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
    if arch:
        env["platform_machine"] = arch
    for req in ctx.requires.get(canonicalize_name(distribution), []):
        marker: Marker | None = req.marker
        try:
            if marker is None or marker.evaluate(env):
                return True
        except Exception:  # packaging raises several types on odd markers; not covered then
            continue
    return False


@dataclass(frozen=True)
class _Problem:
    code: str
    message: str


_Resolved = tuple[Need, "_Problem | None"]


def _resolve_one(
    ctx: _Elves, member: str, info: ElfInfo, soname: str, dirs: Sequence[str]
) -> _Resolved:
    """Where one DT_NEEDED entry goes from ``dirs``, in the order the audit requires."""
    if LIBPYTHON_RE.match(soname) or soname.startswith("libpython"):
        return Need(soname, "libpython", None), _Problem(
            "libpython",
            f"DT_NEEDED {soname}: extensions must take Python's symbols from the "
            "running interpreter, not link libpython",
        )
    if "/" in soname:
        return Need(soname, "missing", None), _Problem(
            "needed-path", f"DT_NEEDED {soname!r} is a path"
        )
    for d in dirs:
        found = ctx.installed.get(posixpath.join(d, soname) if d else soname)
        lib = ctx.elfs.get(found) if found else None
        if found and lib is not None and info.is_compatible(lib):
            return Need(soname, "wheel", found), None
    supplied = ctx.policy.supplier(soname)
    if supplied is not None:
        return _from_distribution(ctx, soname, supplied.distribution, supplied.dir, dirs)
    if soname in ctx.whitelist or "ld-linux" in soname or soname in ("ld64.so.1", "ld64.so.2"):
        return Need(soname, "system", _host_path(ctx, soname, info)), None
    if ctx.policy.is_external(soname):
        return Need(soname, "external", _host_path(ctx, soname, info)), None
    elsewhere = sorted(m for m in ctx.elfs if posixpath.basename(m) == soname)
    hint = (
        f"; the wheel has {', '.join(elsewhere)} but no RUNPATH/RPATH entry reaches it"
        if elsewhere
        else ""
    )
    return Need(soname, "missing", None), _Problem(
        "unresolved",
        f"needs {soname}: not in the wheel, not supplied by a declared "
        "distribution, not a manylinux system library and not expected from the "
        f"{ctx.policy.name} vendor's machine{hint}",
    )


def _from_distribution(
    ctx: _Elves, soname: str, dist: str, where: str, dirs: Sequence[str]
) -> _Resolved:
    if where not in dirs:
        return Need(soname, "missing", None), _Problem(
            "unresolved",
            f"needs {soname}, which {dist} installs in {where}, but no "
            "RUNPATH/RPATH entry reaches that directory",
        )
    need = Need(soname, "distribution", f"{dist}: {posixpath.join(where, soname)}")
    if not _requires_covers(ctx, dist, ctx.arch):
        return need, _Problem(
            "requires-dist",
            f"needs {soname} from {dist} ({where}), but {dist} is not in Requires-Dist",
        )
    return need, None


@dataclass
class _Group:
    """What loading one root (an extension, an executable, a library) brings in, as ld.so does."""

    members: list[str]
    outside: list[tuple[Need, str]]  # a need from outside the wheel, and the member needing it
    resolved: dict[tuple[str, str], _Resolved]


def _load(ctx: _Elves, root: str) -> _Group:
    """Breadth-first like ld.so: a name already loaded (by its SONAME) is not searched again."""
    info = ctx.elfs[root]
    loaded: dict[str, _Resolved] = {}
    for name in {info.soname, posixpath.basename(root)} - {None}:
        loaded[str(name)] = (Need(str(name), "wheel", root), None)
    group = _Group([root], [], {})
    chains: dict[str, tuple[str, ...]] = {root: (root,)}
    queue = deque([root])
    while queue:
        member = queue.popleft()
        mine = ctx.elfs[member]
        dirs = _context_dirs(ctx, member, chains[member])
        for soname in mine.needed:
            if soname not in loaded:
                loaded[soname] = _resolve_one(ctx, member, mine, soname, dirs)
                need = loaded[soname][0]
                if need.kind == "wheel" and need.where and need.where not in chains:
                    chains[need.where] = (*chains[member], need.where)
                    group.members.append(need.where)
                    queue.append(need.where)
                    lib_soname = ctx.elfs[need.where].soname
                    if lib_soname:
                        loaded.setdefault(lib_soname, loaded[soname])
                elif need.kind != "wheel":
                    group.outside.append((need, member))
            group.resolved[(member, soname)] = loaded[soname]
    return group


_RANK = {"wheel": 0, "distribution": 1, "system": 2, "external": 3, "libpython": 4, "missing": 5}


def _resolve_all(ctx: _Elves, f: _Findings) -> None:
    """Load every root; each ELF's needs as resolved in the contexts it is loaded in."""
    roots = [
        m
        for m in sorted(ctx.elfs)
        if m in ctx.extensions or _elf_kind(ctx, m, ctx.elfs[m]) == "executable"
    ]
    seen: set[str] = set()
    results: dict[tuple[str, str], dict[str, _Resolved]] = {}
    for root in [*roots, *sorted(ctx.elfs)]:
        if root in seen:
            continue
        group = _load(ctx, root)
        ctx.groups[root] = group
        seen.update(group.members)
        for key, value in group.resolved.items():
            results.setdefault(key, {})[root] = value
    for member, info in ctx.elfs.items():
        ctx.needs[member] = tuple(
            min(
                (n for n, _ in results.get((member, s), {}).values()),
                key=lambda n: _RANK[n.kind],
                default=Need(s, "missing", None),
            )
            for s in info.needed
        )
    for (member, _soname), by_root in sorted(results.items()):
        problems: dict[_Problem, list[str]] = {}
        for root, (_, problem) in by_root.items():
            if problem is not None:
                problems.setdefault(problem, []).append(root)
        for problem, where in problems.items():
            context = "" if member in where else f" (when loaded by {shorten(where, 3)})"
            f.violation(problem.code, member, problem.message + context)


def _host_path(ctx: _Elves, soname: str, like: ElfInfo) -> str | None:
    hit = ctx.host.find(soname, like)
    return hit[0] if hit else None


# Symbols: every undefined, non-weak symbol must be defined by something loaded with the ELF.


@dataclass(frozen=True)
class _Stranded:
    """A need of another distribution's library that ld.so will not find (:mod:`wheels.loading`)."""

    member: str  # the wheel's ELF that loads the library
    library: str  # the other distribution's library (its name as needed)
    soname: str
    lib: DistLib


@dataclass
class _Scope:
    providers: list[ElfInfo]
    unverifiable: list[str]
    stranded: list[_Stranded] = field(default_factory=list)


def _group_scope(ctx: _Elves, group: _Group) -> _Scope:
    """The objects a dlopen of the group's root puts in its local scope, host ones included.

    Like ld.so, a name already loaded (the wheel's libraries and their direct needs) is not
    searched again; any other need of a library from outside is searched through that library's
    own RUNPATH and the host's directories.
    """
    scope = _Scope([ctx.elfs[m] for m in group.members], [])
    loaded = {ctx.elfs[m].soname or posixpath.basename(m) for m in group.members}
    loaded.update(need.soname for need, _ in group.outside)
    seen: set[str] = set()
    queue = deque(
        (*_outside_node(ctx, need, ctx.elfs[member]), member) for need, member in group.outside
    )
    while queue:
        key, info, label, member = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        if info is None:
            scope.unverifiable.append(label)
            continue
        scope.providers.append(info)
        stranded = dict(stranded_needs(key, info, ctx.policy.distributions, ctx.site_dirs, loaded))
        for soname in info.needed:
            if soname in loaded:
                continue
            loaded.add(soname)
            if soname in stranded:
                # ld.so would not find it; loaded first (as the fix does), it is this copy
                scope.stranded.append(_Stranded(member, label, soname, stranded[soname]))
                hit = installed_copy(stranded[soname], soname, ctx.site_dirs, ctx.host)
            else:
                hit = ctx.host.find(soname, info, search_path(key, info))
            node = (hit[0], hit[1], soname) if hit else (f"none:{soname}", None, soname)
            queue.append((*node, member))
    return scope


def _outside_node(ctx: _Elves, need: Need, like: ElfInfo) -> tuple[str, ElfInfo | None, str]:
    if need.kind == "distribution":
        lib = ctx.policy.supplier(need.soname)
        hit = installed_copy(lib, need.soname, ctx.site_dirs, ctx.host) if lib else None
        if hit is not None and like.is_compatible(hit[1]):
            return hit[0], hit[1], need.soname
    elif need.kind in ("system", "external"):
        hit = ctx.host.find(need.soname, like)
        if hit is not None:
            return hit[0], hit[1], need.soname
    return f"none:{need.soname}", None, need.soname


def _scopes_by_member(ctx: _Elves) -> dict[str, _Scope]:
    """Each ELF's scope: the union of the groups it is loaded in."""
    group_scopes = {root: _group_scope(ctx, g) for root, g in ctx.groups.items()}
    out: dict[str, _Scope] = {}
    for root, group in ctx.groups.items():
        for member in group.members:
            scope = out.setdefault(member, _Scope([], []))
            known = {id(p) for p in scope.providers}
            scope.providers += [p for p in group_scopes[root].providers if id(p) not in known]
            scope.unverifiable += [
                u for u in group_scopes[root].unverifiable if u not in scope.unverifiable
            ]
            scope.stranded += [s for s in group_scopes[root].stranded if s not in scope.stranded]
    return out


def _check_stranded(
    ctx: _Elves, archive: _Archive, scopes: Mapping[str, _Scope], f: _Findings
) -> None:
    stranded = {s for scope in scopes.values() for s in scope.stranded}
    for s in sorted(stranded, key=lambda s: (s.member, s.library, s.soname)):
        home = posixpath.join(s.lib.dir, s.soname) if s.lib.dir else s.soname
        module = s.lib.module
        if module is None:
            remedy = f"list {s.soname} in the DT_NEEDED of this library"
        else:
            packages = _packages_loading(ctx, s.member)
            missing = [p for p in packages if not _imports_first(archive, ctx, p, module)]
            if packages and not missing:
                continue
            where = ", ".join(f"{p or '(top level)'}/__init__.py" for p in missing) or (
                "the package of an extension that loads it"
            )
            remedy = f"import {module} in {where}"
        f.violation(
            "stranded-need",
            s.member,
            f"loads {s.library}, which needs {s.soname} ({s.lib.distribution}: {home}); its own "
            "search path does not reach it and nothing loaded with it loads it, so loading fails "
            f"unless something loaded it before: {remedy}",
        )


def _packages_loading(ctx: _Elves, member: str) -> list[str]:
    """The install directories of the extension modules whose loading loads ``member``."""
    roots = [r for r, g in ctx.groups.items() if r in ctx.extensions and member in g.members]
    return sorted({posixpath.dirname(ctx.install_of.get(r) or r) for r in roots})


def _imports_first(archive: _Archive, ctx: _Elves, package: str, module: str) -> bool:
    """Does ``package``'s ``__init__.py`` import ``module`` at its top level, before any
    relative import (which is how a package loads its extension modules)?"""
    init = ctx.installed.get(posixpath.join(package, "__init__.py"))
    try:
        body = ast.parse(archive.zf.read(init)).body if init else []
    except (SyntaxError, ValueError, KeyError, OSError, zipfile.BadZipFile, zlib.error):
        return False
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level:
            return False
        if (isinstance(node, ast.Import) and any(a.name == module for a in node.names)) or (
            isinstance(node, ast.ImportFrom) and node.module == module
        ):
            return True
    return False


def _bound(
    definers: dict[tuple[str, str], ElfInfo],
    symbol: tuple[str, str],
    providers: Sequence[ElfInfo],
    in_scope: set[int],
) -> bool:
    """Is ``symbol`` defined in ``providers``? Remembers who defined it last time: ELFs share
    most of their libraries, so that one is usually in scope again."""
    known = definers.get(symbol)
    if known is not None and id(known) in in_scope:
        return True
    name, version = symbol
    found = next((p for p in providers if p.defines(name, version)), None)
    if found is not None:
        definers[symbol] = found
    return found is not None


def _check_symbols(
    ctx: _Elves, member: str, scope: _Scope, python_ok: bool, f: _Findings
) -> SymbolCheck:
    info = ctx.elfs[member]
    bound = python = 0
    unverified: list[str] = []
    missing: list[str] = []
    providers = [p for p in scope.providers if p is not info]
    in_scope = {id(p) for p in providers}
    for name, version in zip(info.undefined, info.undefined_versions, strict=True):
        if _bound(ctx.definers, (name, version), providers, in_scope):
            bound += 1
        elif python_ok and _PY_SYMBOL.match(name):
            python += 1
        elif scope.unverifiable:
            unverified.append(f"{name}@{version}" if version else name)
        else:
            missing.append(f"{name}@{version}" if version else name)
    if missing:
        f.violation(
            "undefined-symbol",
            member,
            f"{plural(len(missing), 'undefined symbol')} "
            f"defined by none of the libraries loaded with it: {shorten(missing)}",
        )
    if unverified:
        readable = ", ".join(sorted(set(scope.unverifiable)))
        f.warning(
            "unverified-symbols",
            member,
            f"{plural(len(unverified), 'undefined symbol')} not checked ({readable} not "
            f"readable on this host): {shorten(unverified)}",
        )
    return SymbolCheck(
        len(info.undefined),
        bound,
        python,
        tuple(unverified[:LISTED_SYMBOLS]),
        tuple(sorted(set(scope.unverifiable))),
        tuple(missing[:LISTED_SYMBOLS]),
    )


def _check_python(ctx: _Elves, member: str, info: ElfInfo, f: _Findings) -> None:
    defined = sorted(
        {
            s
            for s in info.exported_like(_PY_EXPORT)
            if is_python_api(s) and not s.startswith("PyInit_")
        }
    )
    core = [s for s in defined if s in PYTHON_CORE]
    if core or len(defined) >= STATIC_PYTHON_MIN:
        named = shorten([*core, *(d for d in defined if d not in core)], 4)
        f.violation(
            "static-libpython",
            member,
            f"defines {plural(len(defined), 'Python C-API symbol')} ({named}): a "
            "statically linked interpreter",
        )
    elif defined:
        f.warning(
            "python-api-symbols",
            member,
            f"exports {shorten(defined, 4)}, named like "
            "the interpreter's own C API: the two can interpose each other",
        )
    module = ctx.extensions.get(member)
    if module and f"PyInit_{module}" not in info.entry_points:
        f.violation(
            "no-pyinit", member, f"extension module {module!r} does not export PyInit_{module}"
        )


def _check_elfs(ctx: _Elves, archive: _Archive, f: _Findings) -> list[ElfReport]:
    for member, info in ctx.elfs.items():
        if ctx.arch and info.arch and info.arch != ctx.arch:
            f.violation("arch", member, f"built for {info.arch}, the wheel is tagged {ctx.arch}")
        elif info.arch is None:
            f.warning("arch", member, info.arch_error or "unknown architecture")
        if ctx.install_of.get(member) is None:
            f.warning(
                "outside-site-packages",
                member,
                "installs outside site-packages, so its $ORIGIN-relative RUNPATH cannot be checked",
            )
        if archive.data_dir and member.startswith(f"{archive.data_dir}/purelib/"):
            f.violation("purelib", member, "shared library in the purelib scheme")
        elif archive.root_is_purelib:
            f.warning(
                "purelib",
                member,
                "shared library in a Root-Is-Purelib wheel: it "
                "installs with the pure-Python files, wherever they go",
            )
        _check_runpaths(ctx, member, info, f)
    _resolve_all(ctx, f)
    in_python = {m for root in ctx.extensions for m in ctx.groups[root].members}
    scopes = _scopes_by_member(ctx)
    _check_stranded(ctx, archive, scopes, f)
    reports = []
    for member, info in ctx.elfs.items():
        _check_python(ctx, member, info, f)
        symbols = _check_symbols(ctx, member, scopes[member], member in in_python, f)
        reports.append(_report(ctx, member, info, symbols))
    return reports


def _report(ctx: _Elves, member: str, info: ElfInfo, symbols: SymbolCheck) -> ElfReport:
    return ElfReport(
        member=member,
        kind=_elf_kind(ctx, member, info),
        arch=info.arch,
        soname=info.soname,
        needed=info.needed,
        rpath=info.rpath,
        runpath=info.runpath,
        version_needs={n.file: n.versions for n in info.version_needs},
        version_defs=info.version_defs,
        exports=info.export_count,
        needs=ctx.needs[member],
        symbols=symbols,
        isa=info.isa_ext,
        defined_names=info.export_names,
        undefined_names=tuple(
            f"{n}@{v}" if v else n
            for n, v in zip(info.undefined, info.undefined_versions, strict=True)
        ),
    )


# ---------------------------------------------------------------------------------------------
# the wheel


def _whitelist(arch: str | None) -> frozenset[str]:
    if arch is None:
        return frozenset()
    try:
        policies = manylinux_policies("glibc", arch)
    except (ValueError, KeyError):
        return frozenset()
    return frozenset().union(*(p.whitelist for p in policies))


def _scan_findings(scans: Sequence[MemberScan], f: _Findings) -> None:
    for scan in scans:
        if scan.read_error:
            f.violation("unreadable-member", scan.name, scan.read_error)
        elif scan.elf_error:
            f.violation(
                "bad-elf",
                scan.name,
                f"starts like an ELF file but cannot be read: {scan.elf_error}",
            )
        elif scan.not_elf_but_named:
            f.warning("not-elf", scan.name, "named like a shared library but is not an ELF file")


def _check_tags(archive: _Archive, verdict: TagVerdict, has_elf: bool, f: _Findings) -> None:
    declared = sorted(set(archive.file_tags) | set(archive.wheel_tags))
    for tag in declared:
        if tag == "any":
            if has_elf:
                f.violation("platform-tag", None, "tagged 'any' (pure Python) but holds ELF files")
            continue
        if not has_elf or verdict.error:
            continue
        allowed = verdict.allows(tag)
        if allowed is False:
            why = "; ".join(verdict.reasons) or "its ELF files"
            f.violation(
                "platform-tag",
                None,
                f"declares {tag}, but its ELF files allow at most {verdict.tag}: {why}",
            )
        elif allowed is None:
            f.violation(
                "platform-tag",
                None,
                f"declares {tag}, which does not fit its ELF files "
                f"({verdict.libc or 'unknown libc'}, {verdict.arch or 'unknown arch'})",
            )
    if has_elf and verdict.error:
        f.warning("platform-tag", None, f"no platform verdict: {verdict.error}")


def _requirements(archive: _Archive) -> dict[str, list[Requirement]]:
    out: dict[str, list[Requirement]] = {}
    for req in archive.requires:
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def _audit(
    path: Path,
    policy: VendorPolicy,
    cache_dir: Path | None,
    workers: int,
    f: _Findings,
    start: float,
) -> WheelAudit:
    archive = _open(path, f)
    if archive is None:
        return _empty(path, policy, f, start)
    with archive.zf:
        return _audit_archive(archive, policy, cache_dir, workers, f, start)


def _audit_archive(
    archive: _Archive,
    policy: VendorPolicy,
    cache_dir: Path | None,
    workers: int,
    f: _Findings,
    start: float,
) -> WheelAudit:
    path = archive.path
    tasks = [
        _task(i, info, "sha256") for i, info in enumerate(archive.infos) if _is_member_file(info)
    ]
    cache = _Cache(cache_dir) if cache_dir is not None else None
    host = HostLibraries(host_library_dirs())

    def meanwhile() -> None:  # while children start on the largest members
        _check_names(archive, f)
        _read_metadata(archive, f)

    scans, hits, batches = _scan(
        path, tasks, cache, workers, meanwhile, lambda: _prepare(archive, host)
    )
    scans = _rehash(archive, path, scans)
    _scan_findings(scans, f)
    _check_record(archive, scans, f)
    by_name = {s.name: s for s in scans}
    elfs = {n: s.elf for n, s in by_name.items() if s.elf is not None}
    verdicts = _verdicts(archive, by_name, policy, host)
    arch = verdicts[0].arch or _first_arch(elfs.values())
    ctx = _context(archive, policy, elfs, arch, host)
    reports = _check_elfs(ctx, archive, f)
    _check_tags(archive, verdicts[1], bool(elfs), f)
    stats = AuditStats(
        members=len(archive.infos),
        elf_members=len(elfs),
        compressed_bytes=sum(t.compress_size for t in tasks),
        uncompressed_bytes=sum(t.file_size for t in tasks),
        cached_batches=hits,
        batches=batches,
        seconds=time.perf_counter() - start,
    )
    return WheelAudit(
        path=path,
        vendor=policy.name,
        distribution=archive.distribution,
        version=str(archive.version) if archive.version else None,
        declared=tuple(sorted(set(archive.file_tags) | set(archive.wheel_tags))),
        tag=verdicts[1].tag,
        auditwheel_tag=verdicts[0].tag,
        tag_reasons=verdicts[1].reasons,
        requires=tuple(str(r) for r in archive.requires),
        elfs=tuple(reports),
        findings=tuple(_ordered(f.items)),
        stats=stats,
    )


def _prepare(archive: _Archive, host: HostLibraries) -> None:
    """Work the analysis will need anyway, done while children finish their last members."""
    arch, _, _ = wheel_platform(archive.path.name)
    if arch is not None:
        _whitelist(arch)
    host.prefetch(
        (
            "libc.so.6",
            "libm.so.6",
            "libstdc++.so.6",
            "libgcc_s.so.1",
            "libpthread.so.0",
            "libdl.so.2",
            "librt.so.1",
        )
    )


def _task(index: int, info: zipfile.ZipInfo, algo: str) -> _Task:
    return _Task(
        index,
        info.filename,
        _raw_name(info),
        info.header_offset,
        info.compress_size,
        info.file_size,
        info.compress_type,
        info.flag_bits,
        algo,
    )


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    return info.orig_filename.encode(encoding, errors="surrogateescape")


def _first_arch(elfs: Iterable[ElfInfo]) -> str | None:
    return next((e.arch for e in elfs if e.arch), None)


def _context(
    archive: _Archive,
    policy: VendorPolicy,
    elfs: dict[str, ElfInfo],
    arch: str | None,
    host: HostLibraries,
) -> _Elves:
    install_of = {
        i.filename: _install_path(archive, i.filename) for i in archive.infos if _is_member_file(i)
    }
    installed = {p: m for m, p in install_of.items() if p is not None}
    ctx = _Elves(
        policy=policy,
        elfs=elfs,
        install_of=install_of,
        installed=installed,
        requires=_requirements(archive),
        whitelist=_whitelist(arch),
        host=host,
        site_dirs=site_dirs(),
        arch=arch,
    )
    for member in elfs:
        module = _extension_module(install_of.get(member), installed)
        if module:
            ctx.extensions[member] = module
    return ctx


def _verdicts(
    archive: _Archive,
    scans: Mapping[str, MemberScan],
    policy: VendorPolicy,
    host: HostLibraries,
) -> tuple[TagVerdict, TagVerdict]:
    """auditwheel's own verdict, and the one with the vendor's outside libraries excluded."""
    members = {n: s.elf for n, s in scans.items()}
    order = archive.record_order or list(members)
    plain = platform_verdict(archive.path.name, members, order, host)
    bundled = {posixpath.basename(n) for n, e in members.items() if e is not None}

    def excluded(soname: str) -> bool:  # like ``auditwheel repair --exclude``
        return policy.outside_wheel(soname) and soname not in bundled

    needed = {n for e in members.values() if e is not None for n in e.needed}
    if not any(excluded(n) for n in needed):
        return plain, plain
    return plain, platform_verdict(archive.path.name, members, order, host, excluded)


def _ordered(items: Iterable[Finding]) -> list[Finding]:
    return sorted(items, key=lambda i: (i.severity != "violation", i.member or "", i.code))
