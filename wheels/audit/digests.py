"""Members' RECORD-style digests: one hash object per member, fed its content in one piece or
part by part as it is inflated, a big member's on a helper thread with the taps that read it as
it streams (:class:`Digest`)."""

from __future__ import annotations

import sys
from contextlib import suppress
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Sequence
    from queue import Queue
    from typing import Protocol

    from wheels.audit.raw import Task

    class Hasher(Protocol):
        def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

        def digest(self) -> bytes: ...


# sha256 of a small wheel's members by the interpreter's own code (``_sha2``, ``_sha256`` before
# Python 3.12) instead of OpenSSL's (``_hashlib``, hashlib's own constructor), whose import
# (libcrypto) takes 2.4 ms: about as long as this whole budget takes the builtin. OpenSSL's is
# 6.5x faster on this machine (1,630 against 252 MB/s, with SHA-NI), so once the budget is
# spent, or once _hashlib is imported anyway, OpenSSL hashes the rest.
BUILTIN_SHA256_BUDGET = 3 << 18  # 768 KiB: 3.0 ms by the builtin, 2.4 + 0.5 by OpenSSL
_builtin_left = [BUILTIN_SHA256_BUDGET]  # what is left of it in this process


class Digest:
    """Hashes parts as they come, and feeds them to the taps in :attr:`also`, in order; a big
    member's parts on a helper thread, beside the inflating one, which then only inflates (its
    compressed bytes are read on a third, :meth:`~wheels.audit.raw.RawFile.ahead`). In process,
    best of five: NCCL 2.29's wheel (a 237 MB library) 306 ms against 280 ms with its fat binary
    tap and kept ranges on the inflating thread, cuSPARSE 12.6's 209 against 190 ms, cuBLAS
    13.1's 873 against 820 ms."""

    QUEUED = 16  # parts handed over and not yet taken at most (4 MB each at most: OUT_STEP)

    def __init__(self, algo: str, size: int, background: bool) -> None:
        self.hasher = new_hash(algo, size)
        self.size = 0
        self.also: list[Callable[[bytes], None]] = []
        self.queue: Queue[bytes | None] | None = None
        self.thread: threading.Thread | None = None
        self.failed: Exception | None = None
        if background:  # (imported here: a small wheel's audit starts no thread)
            import threading
            from queue import Queue

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
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return False
    taken = [
        mallopt(-1, 256 << 20),  # M_TRIM_THRESHOLD: keep this much free at the heap's top
        mallopt(-2, 64 << 20),  # M_TOP_PAD: and grow it this much at a time
        mallopt(-3, 32 << 20),  # M_MMAP_THRESHOLD: its largest (allocations below it: the heap)
    ]
    return taken == [1, 1, 1]


def hash_later(
    tasks: Sequence[Task], kept: dict[int, bytes | bytearray]
) -> Callable[[], dict[int, str]]:
    """The members ``kept`` (their content, by index) hashed on a thread of its own, started
    now, while this one goes on to the checks that need no digest; the function returned waits
    for it and gives their digests. OpenSSL's sha256 lets go of the interpreter's lock as it
    hashes; the thread is ``_thread``'s (``threading`` imports in 5 ms). For a wheel read in
    this process alone, its members of ``pool.LATE_HASH_ABOVE`` or more: the CLI on nvJitLink
    12.4's wheel (a 54 MB library) 165 ms against 171 ms, ruff 0.8.0's (a 31 MB binary) 106
    against 113 ms (medians of 15). The checks are shorter than such a hash: the rest of it is
    waited for."""
    import _thread

    waiting = [t for t in tasks if t.index in kept]
    done = _thread.allocate_lock()
    done.acquire()
    made: dict[int, str] = {}
    failed: list[BaseException] = []

    def run() -> None:
        try:
            for task in waiting:
                made[task.index] = digest_of(task, kept.pop(task.index))
        except BaseException as exc:  # (raised again where the digests are asked for)
            failed.append(exc)
        finally:
            done.release()

    _thread.start_new_thread(run, ())

    def wait() -> dict[int, str]:
        with done:
            if failed:
                raise failed[0]
            return made

    return wait


def digest_of(task: Task, content: bytes | bytearray) -> str:
    """The member's RECORD-style digest, from its content."""
    hasher = new_hash(task.algo, len(content))
    hasher.update(content)
    return encoded(hasher.digest())


def new_hash(algo: str, size: int) -> Hasher:
    """A hash object for ``size`` bytes hashed with ``algo``: the builtin sha256 while
    :data:`BUILTIN_SHA256_BUDGET` lasts and OpenSSL's is not imported, else OpenSSL's."""
    if algo == "sha256" and size <= _builtin_left[0] and "_hashlib" not in sys.modules:
        builtin = _builtin_sha256()
        if builtin is not None:
            _builtin_left[0] -= size
            return builtin()
    try:  # OpenSSL's, as hashlib.new makes it, without hashlib.py itself (1.2 ms more)
        from _hashlib import new

        made: Hasher = new(algo)
    except (ImportError, ValueError):  # (an algorithm OpenSSL lacks here: hashlib's own)
        import hashlib

        return hashlib.new(algo)
    return made


@cache  # (a module that is not there is searched for again on each import)
def _builtin_sha256() -> Callable[[], Hasher] | None:
    for module in ("_sha2", "_sha256"):
        try:
            made: Callable[[], Hasher] = __import__(module).sha256
        except (ImportError, AttributeError):
            continue
        return made
    return None


_URLSAFE = bytes.maketrans(b"+/", b"-_")
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# Digests encoded in Python before binascii is imported (0.65 ms, as long as encoding 150 of
# them here takes): a small wheel's audit does without it.
ENCODED_HERE = 150
_here_left = [ENCODED_HERE]


def encoded(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64 without padding (base64.urlsafe_b64encode,
    which is binascii's encoding and this translation; base64 itself is not imported)."""
    if _here_left[0] > 0 and "binascii" not in sys.modules:
        _here_left[0] -= 1
        return encoded_here(digest)
    from binascii import b2a_base64

    return b2a_base64(digest, newline=False).translate(_URLSAFE).rstrip(b"=").decode()


def encoded_here(digest: bytes) -> str:
    """:func:`encoded`, six bits at a time from the digest as one number (4 us for sha256)."""
    bits = len(digest) * 8
    count = -(-bits // 6)
    value = int.from_bytes(digest, "big") << (count * 6 - bits)
    return "".join([_ALPHABET[(value >> shift) & 63] for shift in range(count * 6 - 6, -1, -6)])
