"""Child processes forked from this one, each running the calls it is given in turn, with the
interface of ``concurrent.futures.ProcessPoolExecutor`` that the parallel scan uses (``submit``,
``shutdown``, and results that say whether they are done).

Not the executor itself, for the memory of the whole process tree: a big library's result (its
export names, tens of megabytes) crosses the pipe as the pickler writes it and is read into one
buffer of its exact size, where the executor's queues copy it again on each side; the children
give their freed heap back after each big result. A call and its result cross a pipe as a pickle
after its length; this process reads results when it asks whether a call is done, and while it
sends a call (so that neither side waits on a full pipe). Used only where ``fork`` is safe: on a
platform that has it, with no other thread running (:func:`usable`); ``wheels.audit.pool`` uses
the executor elsewhere.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import threading
from collections import deque
from contextlib import suppress
from pickle import HIGHEST_PROTOCOL, PickleError, Pickler, dumps, loads
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["ForkPool", "Job", "LostChild", "PickleError", "usable"]

T = TypeVar("T")


_LENGTH = struct.Struct("<Q")
_PROTOCOL = HIGHEST_PROTOCOL
_PIPE_SIZE = 1 << 20  # asked of the kernel for each pipe (F_SETPIPE_SZ), so that a batch's
# results (a big library's export names: megabytes) seldom wait for this process to read them
_F_SETPIPE_SZ = 1031
_BIG_RESULT = 8 << 20  # a result this big is read into a buffer of its size


class LostChild(RuntimeError):
    """A child ended (or could not be reached) before it gave the result of a call."""


def usable() -> bool:
    """Can this process fork safely now? (Forking with other threads running can leave a lock
    they held locked forever in the child.)"""
    return hasattr(os, "fork") and threading.active_count() == 1


class Job(Generic[T]):
    """One call given to a child: its result once it came back."""

    def __init__(self, child: _Child) -> None:
        self._child = child
        self._state: str = "pending"  # pending, ok, error, cancelled
        self._value: Any = None

    def done(self) -> bool:
        if self._state == "pending":
            self._child.receive(block=False)
        return self._state != "pending"

    def cancelled(self) -> bool:
        return self._state == "cancelled"

    def result(self) -> T:
        self._wait()
        if self._state == "ok":
            value: T = self._value
            return value
        if self._state == "cancelled":
            raise LostChild("the call was cancelled")
        raise self._value

    def exception(self) -> BaseException | None:
        self._wait()
        return self._value if self._state == "error" else None

    def _wait(self) -> None:
        while self._state == "pending":
            self._child.receive(block=True)

    def _settle(self, state: str, value: Any) -> None:
        self._state, self._value = state, value


class _Child:
    """One forked child and the two pipes to it: calls in, results out."""

    def __init__(self, siblings: Sequence[_Child]) -> None:
        calls_in, self.calls = os.pipe()
        self.results, results_out = os.pipe()
        for fd in (self.calls, self.results):
            _widen(fd)
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            # (an end of a sibling's pipe left open here would keep it from seeing its end)
            _serve(calls_in, results_out, (self.calls, self.results, *_fds(siblings)))
        os.close(calls_in)
        os.close(results_out)
        os.set_blocking(self.results, False)
        os.set_blocking(self.calls, False)  # (a blocking write waits for the whole call to fit)
        self.waiting: deque[Job[Any]] = deque()
        self.buffer = bytearray()
        self.big: bytearray | None = None  # a big result being read (_read_whole)
        self.filled = 0  # how much of it has come
        self.lost = False
        self.poll = select.poll()
        self.poll.register(self.results, select.POLLIN)

    def fds(self) -> tuple[int, int]:
        return self.calls, self.results

    def send(self, fn: Callable[..., T], args: tuple[Any, ...]) -> Job[T]:
        job: Job[T] = Job(self)
        if self.lost:
            job._settle("error", LostChild("the child has ended"))
            return job
        try:
            data = dumps((fn, args), _PROTOCOL)
        except Exception as exc:  # (raised from the result, as the executor does)
            job._settle("error", exc)
            return job
        self.waiting.append(job)
        self._write(_LENGTH.pack(len(data)) + data)
        return job

    def _write(self, data: bytes) -> None:
        """Send ``data``, reading results meanwhile: a child blocked on writing a result to a
        full pipe reads no call."""
        poll = select.poll()
        poll.register(self.results, select.POLLIN)
        poll.register(self.calls, select.POLLOUT)
        view = memoryview(data)
        while view and not self.lost:
            ready = dict(poll.poll())
            if ready.get(self.results):
                self.receive(block=False)
            if ready.get(self.calls, 0) & select.POLLOUT:
                try:
                    view = view[os.write(self.calls, view) :]
                except BlockingIOError:
                    continue
                except OSError:
                    self._lose()
            elif ready.get(self.calls):  # (an error or hang-up: the child is gone)
                self._lose()

    def receive(self, block: bool) -> None:
        """Read what the child has written, settling each job whose result is whole: all that
        has come, and with ``block`` until one more job is settled. A result that has begun to
        come is read to its end, whose child is writing the rest: left in the pipe, it would
        keep that child from its next call until this process asks again."""
        goal = len(self.waiting) - 1
        while self.waiting and not self.lost:
            try:
                got = self._read_some()
            except BlockingIOError:
                if self.buffer or self.big or (block and len(self.waiting) > goal):
                    self.poll.poll()
                    continue
                return
            except OSError:
                got = 0
            if not got:
                self._lose()
                return
            self._settle_whole()

    def _read_some(self) -> int:
        """Read what has come: into the result being read at its full size, else the buffer."""
        if self.big is not None:
            got = os.readv(self.results, [memoryview(self.big)[self.filled :]])
            self.filled += got
            return got
        chunk = os.read(self.results, 1 << 20)
        self.buffer += chunk
        return len(chunk)

    def _settle_whole(self) -> None:
        if self.big is not None:
            if self.filled < len(self.big):
                return
            with memoryview(self.big) as view:
                ok, value = loads(view)
            self.big = None
            self.waiting.popleft()._settle("ok" if ok else "error", value)
        while len(self.buffer) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self.buffer)
            if len(self.buffer) < _LENGTH.size + size:
                if size >= _BIG_RESULT:
                    self._read_whole(size)
                return
            # Unpickled from a view: a slice would copy the result (80 MB of TensorFlow's
            # exported names) beside the buffer and what it unpickles to.
            with memoryview(self.buffer) as view, view[_LENGTH.size : _LENGTH.size + size] as part:
                ok, value = loads(part)
            del self.buffer[: _LENGTH.size + size]
            self.waiting.popleft()._settle("ok" if ok else "error", value)

    def _read_whole(self, size: int) -> None:
        """Read the rest of a big result into one buffer of its size: a buffer grown as it
        comes holds up to an eighth more, beside what the result unpickles to. The heap this
        process has freed goes back first: the result and its buffer come on top of it."""
        _release_heap()
        self.big = bytearray(size)
        self.filled = len(self.buffer) - _LENGTH.size
        self.big[: self.filled] = memoryview(self.buffer)[_LENGTH.size :]
        self.buffer = bytearray()

    def _lose(self) -> None:
        self.lost = True
        while self.waiting:
            self.waiting.popleft()._settle("error", LostChild("a child ended during a call"))

    def close(self, kill: bool) -> None:
        if kill and not self.lost:
            with suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        for fd in (self.calls, self.results):
            with suppress(OSError):
                os.close(fd)
        while self.waiting:
            self.waiting.popleft()._settle("cancelled", None)
        self.lost = True
        with suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


class ForkPool:
    """``children`` child processes forked now; calls go to the one with the fewest waiting."""

    def __init__(self, children: int) -> None:
        self._children: list[_Child] = []
        try:
            for _ in range(children):
                self._children.append(_Child(self._children))
        except OSError:
            self.shutdown(wait=False)
            raise
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Job[T]:
        if self._closed:
            raise RuntimeError("cannot submit to a pool that was shut down")
        child = min(self._children, key=lambda c: (c.lost, len(c.waiting)))
        return child.send(fn, args)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Ends the children: once they have given every result asked for (``wait``), else at
        once, their unfinished calls cancelled."""
        self._closed = True
        for child in self._children:
            if wait and not cancel_futures:
                for job in list(child.waiting):
                    job.exception()
            child.close(kill=not wait or cancel_futures)
        self._children = []


def _widen(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, OSError):
        pass  # (the default size: results then wait a little longer for this process)


def _fds(children: Sequence[_Child]) -> list[int]:
    return [fd for child in children for fd in child.fds()]


def _serve(calls: int, results: int, others: Sequence[int]) -> None:
    """The child's life, once ``others`` (this process's ends of pipes) are closed: each call
    read from ``calls``, run, and its result (or what it raised) written to ``results``; it
    ends, without running this process's exit handlers, when ``calls`` is closed."""
    code = 0
    try:
        for fd in others:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # (this process's Ctrl-C ends it too)
        while (call := _read_message(calls)) is not None:
            fn, args = loads(call)
            try:
                reply = (True, fn(*args))
            except Exception as exc:  # handed back, raised there
                reply = (False, exc)
            _release_heap()
            try:
                parts = _pickled(reply)
            except Exception as exc:  # an unpicklable result or error
                parts = _pickled((False, LostChild(f"cannot hand back the result: {exc}")))
            del reply  # (written while the parent reads: its big strings need not wait)
            _release_heap()
            _write_all(results, _LENGTH.pack(sum(len(p) for p in parts)), *parts)
            del parts  # (not held while the next call is awaited)
            _release_heap()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _release_heap() -> None:
    """Give the heap this child freed back to the kernel (glibc's ``malloc_trim``): a child
    that streamed a big member asked glibc to keep it (``digests.keep_heap``), and kept, it
    counts beside what the parent holds while it reads the result (TensorFlow 2.21: 200 MB
    in the child as its 80 MB of exported names crossed)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (ImportError, OSError, AttributeError):  # (no ctypes, or a libc without it: musl)
        pass


def _read_message(fd: int) -> bytes | None:
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts = bytearray()
    while len(parts) < size:
        chunk = os.read(fd, min(size - len(parts), 1 << 20))
        if not chunk:
            return None
        parts += chunk
    return bytes(parts)


class _Gathered:
    """A pickle's writes, kept as they come: the pickler hands a big string's encoding to
    ``write`` whole, which is kept, not copied into a buffer that grows by half its size at a
    time (TensorFlow 2.21's 80 MB of exported names cost 200 MB more in the child that way)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)


def _pickled(value: object) -> list[bytes]:
    gathered = _Gathered()
    Pickler(gathered, _PROTOCOL).dump(value)
    return gathered.parts


def _write_all(fd: int, *parts: bytes) -> None:
    if len(parts) > 1 and sum(len(p) for p in parts) < (1 << 20):
        parts = (b"".join(parts),)  # (a small result: one write)
    for data in parts:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
