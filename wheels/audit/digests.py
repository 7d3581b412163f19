"""Members' RECORD-style digests: one hash object per member, fed its content in one piece or
part by part as it is inflated, a big member's on a helper thread with the taps that read it as
it streams (:class:`Digest`)."""

from __future__ import annotations

import base64
import hashlib
import threading
from contextlib import suppress
from queue import Queue
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from wheels.audit.raw import Task


class Hasher(Protocol):
    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def digest(self) -> bytes: ...


class Digest:
    """Hashes parts as they come, and feeds them to the taps in :attr:`also`, in order; a big
    member's parts on a helper thread, beside the inflating one, which then only inflates (its
    compressed bytes are read on a third, :meth:`~wheels.audit.raw.RawFile.ahead`). In process,
    best of five: NCCL 2.29's wheel (a 237 MB library) 306 ms against 280 ms with its fat binary
    tap and kept ranges on the inflating thread, cuSPARSE 12.6's 209 against 190 ms, cuBLAS
    13.1's 873 against 820 ms."""

    QUEUED = 16  # parts handed over and not yet taken at most (4 MB each at most: OUT_STEP)

    def __init__(self, algo: str, size: int, background: bool) -> None:
        self.hasher = new_hash(algo)
        self.size = 0
        self.also: list[Callable[[bytes], None]] = []
        self.queue: Queue[bytes | None] | None = None
        self.thread: threading.Thread | None = None
        self.failed: Exception | None = None
        if background:
            keep_heap()

            self.queue = Queue(self.QUEUED)
            self.thread = threading.Thread(target=self._drain, name="audit-hash", daemon=True)
            self.thread.start()

    @property
    def beside(self) -> bool:
        """Are the parts taken on a helper thread?"""
        return self.queue is not None

    def add(self, part: bytes) -> None:
        self.size += len(part)
        if self.queue is not None:
            self.queue.put(part)
        else:
            self._take(part)

    def _take(self, part: bytes) -> None:
        self.hasher.update(part)
        for feed in self.also:
            feed(part)

    def _drain(self) -> None:
        assert self.queue is not None
        while (part := self.queue.get()) is not None:
            if self.failed is None:  # (taken to the end: the inflating thread never waits)
                try:
                    self._take(part)
                except Exception as exc:  # raised again on the inflating thread, by wait
                    self.failed = exc

    def wait(self) -> None:
        """Every part added is hashed and fed to the taps; what a tap raised is raised here."""
        if self.queue is not None and self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.queue = self.thread = None
        if self.failed is not None:
            failed, self.failed = self.failed, None
            raise failed

    def stop(self) -> None:
        """As :meth:`wait`, once the inflating thread has failed: its error is the one told."""
        with suppress(Exception):
            self.wait()

    def finish(self) -> str:
        self.wait()
        return encoded(self.hasher.digest())


def keep_heap() -> bool:
    """Ask glibc to keep freed heap memory, and to serve parts of a few megabytes from the heap
    rather than from maps of their own: a streamed member's parts (a few hundred kilobytes each,
    made on one thread and freed on another) otherwise go back to the kernel as they are freed
    and come back as fresh pages, each faulted in and zeroed. The CLI on cuBLAS 13.1's wheel
    (a 516 MB library streamed): 46,000 page faults against 62,000, 0.80 s against 0.83 s; on
    NCCL 2.29's 12,000 against 20,000, 0.32 s against 0.34 s (three runs each). Nothing where
    ``mallopt`` is missing (musl's is a no-op). Whether each setting was taken."""
    import ctypes  # (for the few members hashed beside their inflating)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    taken = [
        mallopt(-1, 256 << 20),  # M_TRIM_THRESHOLD: keep this much free at the heap's top
        mallopt(-2, 64 << 20),  # M_TOP_PAD: and grow it this much at a time
        mallopt(-3, 32 << 20),  # M_MMAP_THRESHOLD: its largest (allocations below it: the heap)
    ]
    return taken == [1, 1, 1]


def digest_of(task: Task, content: bytes | bytearray) -> str:
    """The member's RECORD-style digest, from its content."""
    hasher = new_hash(task.algo)
    hasher.update(content)
    return encoded(hasher.digest())


def new_hash(algo: str) -> Hasher:
    """A hash object for ``algo``, as RECORD names it (``sha256``)."""
    return hashlib.new(algo)


def encoded(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
