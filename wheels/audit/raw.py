"""A member's raw bytes in the zip: where they start after its local header, read, mapped or
left in the wheel to be read in steps; and the :class:`Task` that says where they are."""

from __future__ import annotations

import os
import stat
import struct
import threading
from contextlib import suppress
from dataclasses import dataclass
from queue import Empty, Queue
from typing import TYPE_CHECKING

from wheels.audit.directory import CENTRAL, DEFLATED, ZIP64, Entry, plain_directory
from wheels.inflate import ONE_CALL_BELOW

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

ONE_SHOT_BELOW = 1 << 20  # members this small are read with their header, and inflated, in one call
SNAPSHOT_ABOVE = ONE_CALL_BELOW  # members this big are not kept inflated (members._Inflated)
STREAM_READ_ABOVE = 64 << 20  # deflated members this big (inflated) are left in the wheel and
# read in steps (RawFile), neither read whole nor mapped: a mapping's pages count in the peak RSS
READ_AHEAD = 4  # steps read ahead of the inflater at most (RawFile.ahead)

Raw = bytes | memoryview  # a member's compressed bytes, read or mapped


@dataclass(frozen=True, slots=True)
class Task:
    """Where one member's bytes are in the zip, how they are stored, and how to hash them."""

    index: int
    name: str
    raw_name: bytes
    offset: int
    compress_size: int
    file_size: int
    method: int
    flags: int
    algo: str


class MemberError(Exception):
    """A member that cannot be read, inflated or hashed; the message says why, ``code`` names
    the finding."""

    code = "unreadable-member"


class SizeMismatch(MemberError):
    """A member whose content is not of the size the zip directory states; found by inflating
    no more than that size and one byte."""

    code = "size-mismatch"


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        try:
            chunk = os.pread(fd, min(size, 1 << 30), offset)
        except (OSError, ValueError, OverflowError) as exc:
            raise MemberError(f"cannot read {size} bytes at offset {offset}: {exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def read_raw(fd: int, task: Task) -> bytes:
    """The member's compressed bytes, after checking its local header against the directory."""
    guess = 30 + len(task.raw_name) + 64
    small = task.compress_size <= ONE_SHOT_BELOW
    head = _pread(fd, guess + (task.compress_size if small else 0), task.offset)
    start = _data_start(task, head)
    if small and start <= guess:  # one read for header and data: most members are small
        raw = head[start : start + task.compress_size]
    else:
        raw = _pread(fd, task.compress_size, task.offset + start)
    if len(raw) != task.compress_size:
        raise MemberError(f"truncated: {len(raw)} of {task.compress_size} compressed bytes")
    return raw


def _data_start(task: Task, head: bytes) -> int:
    """Where the member's data starts after its local header (read into ``head``)."""
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise MemberError(f"no local file header at offset {task.offset}")
    name_len = int.from_bytes(head[26:28], "little")
    extra_len = int.from_bytes(head[28:30], "little")
    if head[30 : 30 + name_len] != task.raw_name:
        local = head[30 : 30 + name_len].decode("utf-8", "replace")
        raise MemberError(f"the local header names {local!r}, the central directory another file")
    return 30 + name_len + extra_len


class RawFile:
    """The compressed bytes of a big member (:data:`STREAM_READ_ABOVE`), left in the wheel and
    read in steps as they are inflated: steps of a few hundred kilobytes reuse the same memory,
    where one read would fault in a fresh page for every 4 kB and a mapping would hold all of
    them (TensorFlow 2.21's 172 MB ``libtensorflow_cc.so.2``). The ranges the ELF reader later
    asks for are read again from what was kept (:mod:`wheels.audit.sparse`) or, over
    :data:`SNAPSHOT_ABOVE`, from saved states. Used while its member is scanned, then closed.
    """

    def __init__(self, fd: int, start: int, size: int) -> None:
        self.fd, self.start, self.size = fd, start, size

    def __len__(self) -> int:
        return self.size

    def read(self, pos: int, size: int) -> bytes:
        return _pread(self.fd, min(size, self.size - pos), self.start + pos)

    def ahead(self, pos: int, size: int) -> Generator[bytes, None, None]:
        """Its bytes from ``pos`` on, ``size`` at a time, read on a helper thread no more than
        :data:`READ_AHEAD` steps ahead, so that the thread inflating them only inflates (the read
        releases the interpreter's lock): NCCL 2.29's 206 MB of compressed library took 35 ms
        of reads. Stopping early (the consumer closing this generator) stops the reader."""

        chunks: Queue[bytes | Exception] = Queue(READ_AHEAD)
        stop = threading.Event()

        def read() -> None:
            at = pos
            while at < self.size and not stop.is_set():
                try:
                    chunk = self.read(at, size)
                except Exception as exc:  # (a MemberError, or MemoryError): raised by the consumer
                    chunks.put(exc)
                    return
                chunks.put(chunk)
                if not chunk:
                    return
                at += len(chunk)

        reader = threading.Thread(target=read, name="audit-read", daemon=True)
        reader.start()
        try:
            at = pos
            while at < self.size:
                chunk = chunks.get()
                if isinstance(chunk, Exception):
                    raise chunk
                yield chunk
                if not chunk:
                    return
                at += len(chunk)
        finally:
            stop.set()
            while reader.is_alive():  # (a reader waiting to hand a step over is let go)
                with suppress(Empty):
                    chunks.get(timeout=0.01)
            reader.join()

    def steps(self, size: int = 1 << 20, pos: int = 0) -> Generator[bytes, None, None]:
        """Its bytes from ``pos`` on, ``size`` at a time (empty where the file ends early)."""
        for at in range(pos, self.size, size):
            yield self.read(at, size)

    def close(self) -> None:
        os.close(self.fd)


def read_in_steps(task: Task) -> bool:
    """Does :func:`open_raw` give this member's bytes as a :class:`RawFile`?"""
    return task.method == DEFLATED and task.file_size >= STREAM_READ_ABOVE


def open_raw(path: str, task: Task) -> Raw | RawFile:
    """The member's compressed bytes (:func:`read_raw`); for a big deflated member a
    :class:`RawFile` reading them in steps."""
    with open(path, "rb") as fh:
        if not read_in_steps(task):
            return read_raw(fh.fileno(), task)
        start = task.offset + _data_start(
            task, _pread(fh.fileno(), 30 + len(task.raw_name) + 64, task.offset)
        )
        if start + task.compress_size > os.fstat(fh.fileno()).st_size:
            raise MemberError(f"truncated: the wheel ends before its {task.compress_size} bytes")
        return RawFile(os.dup(fh.fileno()), start, task.compress_size)


def task_for(index: int, entry: Entry, algo: str) -> Task:
    """The :class:`Task` of the zip member ``entry``, hashed with ``algo``."""
    return Task(
        index,
        entry.filename,
        entry.raw_name,
        entry.header_offset,
        entry.compress_size,
        entry.file_size,
        entry.compress_type,
        entry.flag_bits,
        algo,
    )


@dataclass(frozen=True)
class Largest:
    """The largest member's task, and how much the rest of the wheel holds."""

    task: Task
    rest_bytes: int  # inflated
    rest_members: int  # entries, directories and links too
    second: int  # the inflated size of the next largest


def largest_member(path: str, algo: str = "sha256") -> Largest | None:
    """The member that inflates to the most bytes (the first of them), as :func:`task_for`
    makes its task, from the central directory alone: 4 ms for torch's 12,248 entries, where
    reading them all takes 20 ms. None when the archive has no such member, or is one this quick
    read leaves to :mod:`wheels.audit.directory` (zip64, spanned or prefixed archives, names
    with a NUL byte, anything unexpected)."""
    try:
        with open(path, "rb") as fh:
            found = plain_directory(fh.fileno())
    except OSError:
        return None
    return None if found is None else _largest(found[0], found[1], algo)


def _largest(directory: bytes, count: int, algo: str) -> Largest | None:
    best: Task | None = None
    pos = total = second = 0
    try:
        for index in range(count):
            (magic, _, flags, method, _, compressed, inflated, name_len, extra_len,
             comment_len, attrs, offset) = CENTRAL.unpack_from(directory, pos)  # fmt: skip
            if magic != b"PK\x01\x02" or ZIP64 in (compressed, inflated, offset):
                return None
            raw_name = directory[pos + CENTRAL.size : pos + CENTRAL.size + name_len]
            pos += CENTRAL.size + name_len + extra_len + comment_len
            total += inflated
            if best is not None and inflated <= best.file_size:
                second = max(second, inflated)
                continue
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            if "\0" in name:
                return None
            if name.endswith("/") or stat.S_ISLNK(attrs >> 16):
                continue
            second = best.file_size if best is not None else second
            best = Task(index, name, raw_name, offset, compressed, inflated, method, flags, algo)
    except (struct.error, UnicodeDecodeError):
        return None
    return None if best is None else Largest(best, total - best.file_size, count - 1, second)


def raw_or_error(path: str, task: Task) -> Raw | RawFile | MemberError:
    """:func:`open_raw`, or what keeps the member from being read."""
    try:
        return open_raw(path, task)
    except MemberError as exc:
        return exc
    except OSError as exc:
        return MemberError(f"cannot open the wheel: {exc}")


def raws_or_errors(path: str, batch: Sequence[Task]) -> list[Raw | RawFile | MemberError]:
    """:func:`read_raw` of each member of ``batch``, or what keeps it from being read."""
    raws: list[Raw | RawFile | MemberError] = []
    try:
        with open(path, "rb") as fh:
            for task in batch:
                try:
                    raws.append(read_raw(fh.fileno(), task))
                except MemberError as exc:
                    raws.append(exc)
    except OSError as exc:
        raws += [MemberError(f"cannot open the wheel: {exc}")] * (len(batch) - len(raws))
    return raws
