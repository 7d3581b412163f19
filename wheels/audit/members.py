"""Reading members: their raw bytes (:mod:`wheels.audit.raw`) inflated once, in one call or in
bounded steps, while hashed, and ELF members decoded from the inflated bytes in memory
(:mod:`wheels.elf`).

A member described by a :class:`~wheels.audit.raw.Task` is read into a :class:`MemberScan` (its
size, its RECORD-style digest, its ELF data), the unit the cache stores and the pool passes
between processes.
"""

from __future__ import annotations

import zipfile
import zlib
from bisect import bisect_left, bisect_right
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from wheels.audit.digests import Digest, digest_of
from wheels.audit.directory import DEFLATED, STORED
from wheels.audit.raw import (
    ONE_SHOT_BELOW,
    SNAPSHOT_ABOVE,
    MemberError,
    Raw,
    RawFile,
    SizeMismatch,
    Task,
)
from wheels.audit.sparse import SPARSE_ABOVE, Keeper, Sparse, Spooled
from wheels.cuda import FATBIN_SECTIONS
from wheels.elf import ELF_MAGIC, Chunks, ElfError, ElfInfo, looks_like_elf, read_elf, section_spans
from wheels.inflate import (
    ONE_CALL_BELOW,
    InflateError,
    inflate_one_call,
    new_stream,
    stream_errors,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator

    from wheels.cuda.fatbin import DeviceCode
    from wheels.cuda.tap import FatbinTap
    from wheels.elf import ByteSource
    from wheels.inflate import Inflater


MAX_MEMBER = 4 << 30  # larger members are reported, not inflated
INFLATE_STEP = 256 << 10  # compressed bytes fed per inflate call (zlib-ng: 0.84 s at 32 KB,
# 0.75 s at 256 KB for torch's ELF members)
# Compressed bytes per read and inflate call for a member read ahead and hashed beside (ISA-L):
# fewer hand-overs between the three threads on two cores. The CLI against 256 KB steps (and 8
# read ahead, not 4): cuBLAS 13.1 0.74 s against 0.85 s, NCCL 2.29 0.29 against 0.34, cuSPARSE
# 12.6 0.25 against 0.30 (three runs each).
AHEAD_STEP = 2 << 20
OUT_STEP = 4 << 20  # inflated bytes per call at most: bounded output, however dense the input
SNAPSHOT_EVERY = 4 << 20
KEEP_PREFIX = 8 << 20
# Compressed bytes per inflate call for a member over a gigabyte, whose inflater's state is saved
# every few megabytes: a saved copy holds the input its call left unconsumed (the rest of a 2 MB
# read, for a 4 GiB member of zeros: 1.1 GB held across 1,024 states), so it is fed in pieces
# that leave little (32 kB at most; about 10,000 calls a gigabyte of ordinary code).
SNAPSHOT_PIECE = 32 << 10
KEEP_BLOCKS = 8  # re-inflated blocks of a big member kept at once (SNAPSHOT_EVERY bytes each)
HASH_THREAD_ABOVE = 64 << 20  # streamed members this big are hashed on a second thread, given a
# free core (a member inflated in one call is hashed after it: nothing to overlap)


@dataclass(frozen=True, slots=True)
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
    read_code: str = "unreadable-member"  # the finding a read_error makes: or size-mismatch
    device: DeviceCode | None = None  # CUDA device code, for an ELF file that has some
    device_error: str | None = None


def inflate(
    task: Task, raw: Raw | RawFile, path: str, spare_core: bool
) -> tuple[ByteSource | bytes | bytearray, str]:
    """The member's content (in one piece, or as a :class:`~wheels.elf.ByteSource` when it was
    inflated in steps) and its RECORD-style digest; bounded by the stated size. With
    ``spare_core``, a big member is hashed on a second thread as it is inflated."""
    if task.flags & 1:
        raise MemberError("encrypted member")
    if task.file_size > MAX_MEMBER:
        raise MemberError(f"states {task.file_size} bytes, more than this audit inflates")
    sparse = _sparse(task)
    whole = None
    if not isinstance(raw, RawFile) and not sparse:
        whole = _inflate_whole(task, raw, path)
    if whole is not None:  # most members: hashed here, without the streaming path's objects
        if len(whole) != task.file_size:
            raise _mismatch(len(whole), task.file_size)
        return whole, digest_of(task, whole)
    digest = Digest(
        task.algo, task.file_size, background=spare_core and task.file_size >= HASH_THREAD_ABOVE
    )
    try:
        content = _inflate_stream(task, raw, digest, sparse)
    except BaseException:
        digest.stop()  # (its helper thread joined; what the member did wrong is what is said)
        raise
    value = digest.finish()
    if digest.size != task.file_size:
        raise _mismatch(digest.size, task.file_size)
    return content, value


def _mismatch(found: int, stated: int) -> SizeMismatch:
    if found > stated:
        return SizeMismatch(f"inflates past the {stated} bytes the zip directory states")
    return SizeMismatch(f"holds {found} bytes, the zip directory says {stated}")


def _sparse(task: Task) -> bool:
    """Is the member streamed and kept only where it is read (:mod:`wheels.audit.sparse`), not
    inflated whole into memory? A big deflated one (see also wheels.inflate)."""
    return task.method == DEFLATED and SPARSE_ABOVE <= task.file_size < SNAPSHOT_ABOVE


def _inflate_whole(task: Task, raw: Raw, path: str) -> bytes | bytearray | None:
    """The member's content in one piece; None for a deflated member to inflate in steps."""
    if task.method == STORED:
        return bytes(raw)  # (only deflated members are mapped: this copies nothing)
    if task.method != DEFLATED:
        return _inflate_other(task, path)
    if task.file_size == 0 and raw in _EMPTY_STREAMS:  # (an empty __init__.py, py.typed)
        return b""
    fast = _inflate_fast(task, raw)
    if fast is not None:
        return fast
    return _inflate_small(task, raw) if len(raw) <= ONE_SHOT_BELOW else None


# Whole deflate streams that inflate to nothing: an empty final block, fixed (zlib's, for an empty
# file) or stored. libdeflate is not asked for an empty output.
_EMPTY_STREAMS = (b"\x03\x00", b"\x01\x00\x00\xff\xff")


def content_of(task: Task, raw: Raw, path: str) -> bytes | bytearray:
    """A small member's content in one piece (metadata, a package's ``__init__.py``), as
    :func:`inflate` reads and checks it; joined when it came in steps."""
    content, _ = inflate(task, raw, path, spare_core=False)
    if isinstance(content, bytes | bytearray):
        return content
    return bytes(content.range(0, task.file_size))


def _inflate_fast(task: Task, raw: Raw) -> bytearray | None:
    """In one call by libdeflate, into no more than the stated size; None when it is not
    installed, the member is too big to keep, or the data does not inflate to the stated size
    (zlib then says exactly what is wrong)."""
    if not 0 < task.file_size < ONE_CALL_BELOW:
        return None
    try:
        # Deflate expands at most 1032:1: a larger stated size is a lie, not an allocation.
        data = inflate_one_call(raw, min(task.file_size, len(raw) * 1032))
    except InflateError:
        return None
    return data if data is not None and len(data) == task.file_size else None


def _inflate_small(task: Task, raw: Raw) -> bytes:
    """Inflated to no more than the stated size and one byte: a byte more is a lie."""

    inflater = zlib.decompressobj(-15)
    try:
        data = inflater.decompress(raw, task.file_size + 1)  # all of it, unless a lie
    except zlib.error as exc:
        raise MemberError(f"corrupt deflate data: {exc}") from None
    if len(data) == task.file_size and not inflater.eof:
        raise MemberError("deflate data ends early (truncated member)")
    return data


@dataclass(frozen=True, slots=True)
class _Point:
    """An inflater state to resume from: ``out`` bytes produced after ``inp`` bytes consumed."""

    out: int
    inp: int
    state: Inflater


class _Inflated:
    """A member too big to keep (:data:`SNAPSHOT_ABOVE`, a gigabyte), read without keeping it:
    its first bytes, and states to re-inflate from.

    The few ranges the audit reads past the kept prefix (the dynamic segment, notes, section
    headers) are inflated again from the nearest saved state. That is cheap for a library with
    no device code, but a fat binary's walk touches every block: for NCCL's 239 MB library it
    inflated the member a second time (1.55 s, against 0.98 s kept whole in one call), which
    is why members below that size are kept.
    """

    def __init__(
        self,
        raw: Raw | RawFile,
        prefix: bytes,
        points: list[_Point],
        size: int,
        tap: FatbinTap,
    ) -> None:
        self.raw, self.prefix, self.points, self.size = raw, prefix, points, size
        self.fatbin_seen = tap.seen  # headers seen while inflating: see wheels.cuda.tap
        self._outs = [p.out for p in points]
        self._blocks: dict[int, bytes] = {}  # the few last inflated, see _block

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))

    def range(self, offset: int, size: int) -> memoryview:
        if size <= 0:  # as Chunks.range; at a saved state's offset no block would be read
            return memoryview(b"")
        if offset + size <= len(self.prefix):
            return memoryview(self.prefix)[offset : offset + size]

        first = bisect_right(self._outs, offset) - 1
        last = bisect_left(self._outs, offset + size)
        blocks = [self._block(k) for k in range(first, last)]
        data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        start = offset - self.points[first].out
        return memoryview(data)[start : start + size]

    def _block(self, k: int) -> bytes:
        if k not in self._blocks:
            point = self.points[k]
            end = self.points[k + 1].out if k + 1 < len(self.points) else self.size
            out = point.out
            parts: list[bytes] = []
            for part, _ in _steps(point.state.copy(), self.raw, point.inp):
                parts.append(part)
                out += len(part)
                if out >= end:
                    break
            if len(self._blocks) >= KEEP_BLOCKS:  # a walk over a big fatbin touches them all
                del self._blocks[next(iter(self._blocks))]
            self._blocks[k] = b"".join(parts)[: end - point.out]
        return self._blocks[k]


def _steps(
    inflater: Inflater,
    raw: Raw | RawFile,
    pos: int,
    limit: int | None = None,
    ahead: bool = False,
    piece: int | None = None,
) -> Iterator[tuple[bytes, int]]:
    """Each part ``inflater`` makes of ``raw[pos:]``, no more than :data:`OUT_STEP` bytes, and
    how far into ``raw`` it has consumed by then (where a copy of its state resumes); given
    ``limit``, no more than that many bytes in all (a :class:`SizeMismatch` past it). With
    ``ahead``, a :class:`RawFile` is read on a helper thread (:meth:`RawFile.ahead`); with
    ``piece``, each read is fed ``piece`` bytes at a time (:data:`SNAPSHOT_PIECE`)."""
    chunks: Generator[bytes | memoryview, None, None]
    if isinstance(raw, RawFile):
        chunks = raw.ahead(pos, AHEAD_STEP) if ahead else raw.steps(INFLATE_STEP, pos)
    else:
        view = memoryview(raw)
        chunks = (view[at : at + INFLATE_STEP] for at in range(pos, len(raw), INFLATE_STEP))
    with closing(chunks):  # (a reader thread stops when this does)
        out = 0
        for read in chunks:
            if not read:
                raise MemberError("the wheel ends inside the member")
            for fed in _pieces(read, piece):
                pos += len(fed)
                chunk = fed
                while True:
                    step = OUT_STEP if limit is None else min(OUT_STEP, limit + 1 - out)
                    part = inflater.decompress(chunk, step)  # (step > 0: 0 means no limit)
                    out += len(part)
                    if limit is not None and out > limit:
                        raise _mismatch(out, limit)
                    chunk = inflater.unconsumed_tail
                    yield part, pos - len(chunk)
                    if not chunk:
                        break


def _pieces(read: bytes | memoryview, piece: int | None) -> Iterator[bytes | memoryview]:
    """``read`` whole, or in ``piece``-byte views."""
    if piece is None or len(read) <= piece:
        yield read
        return
    view = memoryview(read)
    for at in range(0, len(view), piece):
        yield view[at : at + piece]


def _inflate_stream(
    task: Task, raw: Raw | RawFile, digest: Digest, sparse: bool = False
) -> ByteSource:
    """Inflate in bounded steps, hashing as it goes; keep all of it, or for big members only
    what is read (``sparse``), or over a gigabyte a prefix and a saved state every few
    megabytes."""
    snapshots = task.file_size >= SNAPSHOT_ABOVE
    keep_all = not snapshots and not sparse
    inflater = new_stream(copyable=snapshots)
    parts: list[bytes] = []
    points = [_Point(0, 0, inflater.copy())] if snapshots else []
    tap = None if keep_all else _tap(code_too=sparse)
    keeper = Keeper(task.file_size) if sparse else None
    kept = 0

    digest.also += [t.feed for t in (tap, keeper) if t is not None]

    def take(part: bytes) -> None:
        nonlocal kept
        if keep_all or (snapshots and kept < KEEP_PREFIX):
            parts.append(part)
            kept += len(part)
        digest.add(part)

    try:
        piece = SNAPSHOT_PIECE if snapshots else None
        steps = _steps(inflater, raw, 0, task.file_size, ahead=digest.beside, piece=piece)
        for part, consumed in steps:
            take(part)
            if snapshots and digest.size >= points[-1].out + SNAPSHOT_EVERY:
                points.append(_Point(digest.size, consumed, inflater.copy()))
        tail = inflater.flush()
    except stream_errors() as exc:
        raise MemberError(f"corrupt deflate data: {exc}") from None
    if tail:
        if digest.size + len(tail) > task.file_size:
            raise _mismatch(digest.size + len(tail), task.file_size)
        take(tail)
    if not inflater.eof:
        raise MemberError("deflate data ends early (truncated member)")
    digest.wait()  # (the taps have seen every part)
    if tap is None:
        return Chunks(parts)
    if keeper is not None:
        return keeper.source(lambda: _again(task, raw), tap.seen)
    return _Inflated(raw, b"".join(parts), points, digest.size, tap)


def _again(task: Task, raw: Raw | RawFile) -> ByteSource:
    """A member kept sparse, for a read outside what was kept: inflated again in steps into a
    temporary file, never whole into memory."""
    try:
        return Spooled(p for p, _ in _steps(new_stream(copyable=False), raw, 0, task.file_size))
    except stream_errors() as exc:  # (it inflated well once: only a wheel changed meanwhile)
        raise MemberError(f"corrupt deflate data: {exc}") from None


def _tap(code_too: bool) -> FatbinTap:
    from wheels.cuda.tap import FatbinTap

    return FatbinTap(code_too)


def _inflate_other(task: Task, path: str) -> bytes:
    # bzip2 and lzma are legal zip methods that wheels hardly use: let zipfile read them.

    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.infolist()[task.index]
            with zf.open(info) as member:
                data = member.read(task.file_size + 1)
    except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError, RuntimeError,
            IndexError, zlib.error) as exc:  # fmt: skip
        raise MemberError(f"cannot read (compression method {task.method}): {exc}") from None
    return data


def scan_member(
    task: Task,
    raw: Raw | RawFile | MemberError,
    path: str,
    spare_core: bool,
) -> MemberScan:
    """One member read into a :class:`MemberScan`; problems become its fields."""
    if isinstance(raw, MemberError):
        return MemberScan(task.index, task.name, algo=task.algo, read_error=str(raw))
    try:
        return _scan(task, raw, path, spare_core)
    except MemberError as exc:
        return MemberScan(
            task.index, task.name, algo=task.algo, read_error=str(exc), read_code=exc.code
        )
    finally:
        if isinstance(raw, RawFile):
            raw.close()


def _scan(
    task: Task,
    raw: Raw | RawFile,
    path: str,
    spare_core: bool,
) -> MemberScan:
    inflated, digest = inflate(task, raw, path, spare_core)
    head = bytes(inflated[:4]) if isinstance(inflated, bytes | bytearray) else inflated.head(4)
    base = MemberScan(task.index, task.name, task.file_size, digest, task.algo)
    if not looks_like_elf(task.name, head):
        return base
    if head != ELF_MAGIC:
        return replace(base, not_elf_but_named=True)
    content = Chunks([inflated]) if isinstance(inflated, bytes | bytearray) else inflated
    try:
        return _read(base, content)
    finally:
        if isinstance(content, Sparse):
            content.close()


def _read(base: MemberScan, content: ByteSource) -> MemberScan:
    try:
        elf = read_elf(content)
    except ElfError as exc:
        return replace(base, elf_error=str(exc))
    device, device_error = _device_code(content)
    return replace(base, elf=elf, device=device, device_error=device_error)


def _device_code(content: ByteSource) -> tuple[DeviceCode | None, str | None]:
    """The ELF file's CUDA device code, or why it cannot be read
    (:func:`wheels.cuda.devicecode.scan`); the CUDA readers are loaded only for a file with a fat
    binary section, or whose section headers cannot be read (they say why)."""
    try:
        spans: dict[str, tuple[int, int]] | None = section_spans(content, FATBIN_SECTIONS)
    except ElfError:
        spans = None
    if spans == {}:
        return None, None
    from wheels.cuda import devicecode

    # From the same bytes: in memory, or for a big member the headers seen while inflating.
    return devicecode.scan(content, getattr(content, "fatbin_seen", None), spans)
