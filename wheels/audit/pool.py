"""Every member read once: members in batches, big wheels spread over processes, largest
members first, each batch looked up in the cache before it is read."""

from __future__ import annotations

import os
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from wheels.audit.cache import Cache
from wheels.audit.members import (
    HASH_THREAD_ABOVE,
    MemberScan,
    scan_member,
)
from wheels.audit.raw import MemberError, Task, largest_member, raw_or_error, raws_or_errors
from wheels.audit.sparse import SPARSE_ABOVE

if TYPE_CHECKING:
    import multiprocessing.context
    from collections.abc import Callable, Sequence


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Future(Protocol[T_co]):
    """A call given to a child (a ``concurrent.futures.Future`` or a ``forks.Job``)."""

    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def result(self) -> T_co: ...
    def exception(self) -> BaseException | None: ...


class Pool(Protocol):
    """Child processes (a ``forks.ForkPool``, or a ``ProcessPoolExecutor`` where fork is
    not safe)."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]: ...
    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 1024
SERIAL_BELOW = 16 << 20  # wheels that inflate to less than this are read in this process alone
EARLY_ABOVE = 8 << 20  # wheels this big (compressed) fork their children before the zip directory
# is read, so that the children start while it is (torch's: 12,248 entries, 45-90 ms)
BESIDE_RATIO = 3  # a largest member this many times the rest of its wheel is hashed beside
MEMBER_WORK = 32 << 10  # what reading a member costs beyond its bytes, as bytes (torch's 12,000
# small members take this process about 0.2 s)
REST_ALONE = 4 << 20  # members but the largest weighing less are read with it in this process:
# a child costs more than the rest (ruff 0.8.4: 30 MB and 1.6 MB, 0.16-0.19 s against 0.21-0.26)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


Result = tuple[list[MemberScan], bool]  # a batch's scans, and whether they came from the cache


def _failures() -> tuple[type[BaseException], ...]:
    """What a lost or failing child raises from a future: forks.LostChild and the executor's
    BrokenProcessPool are RuntimeErrors; a result that cannot be pickled, a PickleError."""
    from pickle import PickleError

    return (OSError, EOFError, RuntimeError, PickleError)


def _run_batch(
    path: str,
    batch: Sequence[Task],
    cache: Cache | None,
    spare_core: bool = False,
) -> Result:
    # A member alone: a big one left in the wheel and read in steps (its cache key too).
    alone = len(batch) == 1
    raws = [raw_or_error(path, batch[0])] if alone else raws_or_errors(path, batch)
    good = [r for r in raws if not isinstance(r, MemberError)]
    key = cache.key(batch, good) if cache is not None and len(good) == len(raws) else None
    if key is not None and cache is not None:
        hit = cache.get(key, batch)
        if hit is not None:
            return hit, True
    scans = [
        scan_member(task, raw, path, spare_core) for task, raw in zip(batch, raws, strict=True)
    ]
    if key is not None and cache is not None and not any(s.read_error for s in scans):
        cache.put(key, scans)
    return scans, False


def hashes_beside(size: int, rest_bytes: int, rest_members: int) -> bool:
    """Is the other core free while the largest member (``size`` bytes) is read? When it is
    :data:`BESIDE_RATIO` times the rest of the wheel, the process with the rest would idle for
    most of the time: the member's hash then runs on a second thread as it is inflated, and
    it is kept only where it is read (``members.inflate``). The CLI on cuBLAS 13.1's wheel (a
    516 MB library and 52 MB more): 1.05 s against 1.27 s; NCCL's 0.81 s against 0.96 s. Not
    for torch, whose 12,000 small members keep the other core busy."""
    rest = rest_bytes + rest_members * MEMBER_WORK
    return size >= HASH_THREAD_ABOVE and size >= BESIDE_RATIO * rest


def _rest_is_little(batches: Sequence[Sequence[Task]]) -> bool:
    """Do the batches but the first (the largest member) weigh less than :data:`REST_ALONE`?"""
    rest = [t for batch in batches[1:] for t in batch]
    return sum(t.file_size for t in rest) + len(rest) * MEMBER_WORK < REST_ALONE


def _first_beside(batches: Sequence[Sequence[Task]]) -> bool:
    """:func:`hashes_beside` for the first batch, when it is one member."""
    if not batches or len(batches[0]) != 1:
        return False
    rest = [t for batch in batches[1:] for t in batch]
    return hashes_beside(batches[0][0].file_size, sum(t.file_size for t in rest), len(rest))


def _run_batches(
    path: str, batches: Sequence[Sequence[Task]], cache: Cache | None, spare_core: bool
) -> list[Result]:
    return [_run_batch(path, b, cache, spare_core) for b in batches]


def _batches(tasks: Sequence[Task]) -> list[list[Task]]:
    """Big members alone, small ones together; largest first so that the long ones start early."""
    batches: list[list[Task]] = []
    current: list[Task] = []
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


@dataclass(frozen=True)
class Children:
    """The child processes of one audit, forked before its zip directory is read, and the
    batch of its largest member when that was handed to them then."""

    pool: Pool
    first: tuple[Task, Future[Result]] | None


def start_children(path: str, workers: int, cache: Cache | None) -> Children | None:
    """The ``workers - 1`` child processes, forked now for a wheel of :data:`EARLY_ABOVE` bytes
    or more, while this process is small; a child starts at once on the wheel's largest member
    when a quick read of the central directory finds it (:func:`largest_member`), instead of
    idling while this process reads the whole directory. None for a smaller wheel, or when they
    cannot be started. Give the result to :func:`scan_members`, which shuts them down."""
    try:
        if workers <= 1 or os.stat(path).st_size < EARLY_ABOVE:
            return None
    except OSError:
        return None
    found = largest_member(path)
    if found is not None and found.rest_bytes + found.rest_members * MEMBER_WORK < REST_ALONE:
        return None
    pool = _new_pool(workers - 1)
    if pool is None:
        return None
    try:
        if found is None or found.task.file_size < BATCH_BYTES:  # (not a batch of its own)
            pool.submit(os.getpid)  # (the executor starts its children on its first call)
            return Children(pool, None)
        largest = found.task
        beside = hashes_beside(largest.file_size, found.rest_bytes, found.rest_members)
        future = pool.submit(_run_batch, path, [largest], cache, beside)
        return Children(pool, (largest, future))
    except (OSError, RuntimeError):
        pool.shutdown(wait=False)
        return None


def scan_members(
    path: str,
    tasks: Sequence[Task],
    cache: Cache | None,
    workers: int,
    meanwhile: Callable[[], None] = lambda: None,
    while_waiting: Callable[[], None] = lambda: None,
    children: Children | None = None,
) -> tuple[list[MemberScan], int, int]:
    """Read every member once: here, and in ``workers - 1`` child processes for big wheels
    (``children``, when :func:`start_children` started them; shut down here either way).

    Returns the scans, ordered as the members, the batches found in the cache, and the batches.

    Processes rather than threads: inflating one 434 MB member takes thousands of short calls,
    each of which would wait for the GIL behind threads busy with small members.
    """
    batches = _batches(tasks)
    total = sum(t.file_size for t in tasks)
    small = total < SERIAL_BELOW or len(batches) < 2 or _rest_is_little(batches)
    if workers <= 1 or (small and (children is None or children.first is None)):
        # (a child already reading the largest member is used, whatever the wheel's size)
        if children is not None:
            children.pool.shutdown(wait=False)
        meanwhile()
        results = [_run_batch(path, b, cache, workers > 1) for b in batches]
    else:
        results = _scan_parallel(path, batches, cache, workers, meanwhile, while_waiting, children)
    scans = sorted((s for batch, _ in results for s in batch), key=lambda s: s.index)
    return scans, sum(hit for _, hit in results), len(batches)


def _scan_parallel(
    path: str,
    batches: Sequence[Sequence[Task]],
    cache: Cache | None,
    workers: int,
    meanwhile: Callable[[], None],
    while_waiting: Callable[[], None],
    started: Children | None,
) -> list[Result]:
    """Children take batches from the large end, one at a time; this process from the small end
    (after a second long member, when there is one: :func:`_long_first`).

    The largest members go to children, whose inflate loops never wait for a GIL held by this
    process's bookkeeping; a batch is handed out only when a child is free, so none is left
    queued behind a long one while this process has nothing to do.
    """
    children = workers - 1
    pool = started.pool if started is not None else _new_pool(children)
    if pool is None:
        meanwhile()
        return _run_batches(path, batches, cache, spare_core=False)
    beside = _first_beside(batches)
    todo = deque(batches)
    handed = _handed_first(started, todo)

    def feed() -> None:  # (without a child, everything is read here)
        with suppress(*_failures()):
            while todo and sum(not f.done() for _, f in handed) < children:
                batch = todo.popleft()
                spare = beside and not handed  # (the first batch, the largest member)
                handed.append((batch, pool.submit(_run_batch, path, batch, cache, spare)))

    try:
        feed()
        meanwhile()
        results = _long_first(path, todo, cache, feed)
        results += _read_here(path, todo, cache, feed)
        if not all(f.done() for _, f in handed):
            while_waiting()
        results += _collected(path, handed, cache)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _long_first(
    path: str, todo: deque[Sequence[Task]], cache: Cache | None, feed: Callable[[], None]
) -> list[Result]:
    """The next largest member, read here before the small ones when it is a long one (of
    :data:`SPARSE_ABOVE` bytes or more) that no child is free to take. Left for last, it was
    this process's final work, while the child, done with the largest, had nothing left to
    take. Largest first on both sides, the small batches then fill in wherever a process is
    free: the CLI on torch's CUDA wheel (libraries of 470 and 438 MB) 2.14 s against 2.51 s;
    cuDNN 9.1's (570, 241, 108 and 86 MB) 2.44 against 2.40 s, cuBLAS 12.4's 1.58 s both ways
    (medians of 5, interleaved)."""
    if not todo or len(todo[0]) != 1 or todo[0][0].file_size < SPARSE_ABOVE:
        return []
    results = [_run_batch(path, todo.popleft(), cache)]
    feed()
    return results


def _read_here(
    path: str,
    todo: deque[Sequence[Task]],
    cache: Cache | None,
    feed: Callable[[], None],
) -> list[Result]:
    """This process's batches, taken from the small end, handing batches to free children after
    each."""
    results = []
    while todo:
        batch = todo.pop()
        results.append(_run_batch(path, batch, cache))
        feed()
    return results


def _collected(
    path: str, handed: Sequence[tuple[Sequence[Task], Future[Result]]], cache: Cache | None
) -> list[Result]:
    """The children's results; a batch whose child was lost is read here."""
    out = []
    for batch, future in handed:
        try:
            out.append(future.result())
        except _failures():
            out.append(_run_batch(path, batch, cache))
    return out


def _handed_first(
    started: Children | None, todo: deque[Sequence[Task]]
) -> list[tuple[Sequence[Task], Future[Result]]]:
    """The batch a child took before the directory was read, when it is the first one due (the
    same member: it always is); that batch is then no longer to do."""
    if started is None or started.first is None or not todo:
        return []
    task, future = started.first
    if list(todo[0]) != [task]:
        return []  # (another member: its result is left unread)
    return [(todo.popleft(), future)]


def _new_pool(children: int) -> Pool | None:
    """``children`` processes forked from this one (:mod:`wheels.audit.forks`); where forking
    is not safe, a ``ProcessPoolExecutor`` that starts them another way. None when they cannot
    be started. Their modules are loaded here: a small wheel is read in this process alone."""
    from wheels.audit.forks import ForkPool, usable

    if usable():
        try:
            return ForkPool(children)
        except OSError:
            return None

    from concurrent.futures import ProcessPoolExecutor

    try:
        return ProcessPoolExecutor(max_workers=children, mp_context=_mp_context())
    except (OSError, ValueError, RuntimeError):
        return None


def _mp_context() -> multiprocessing.context.BaseContext:
    """How the executor starts its children where forking is not safe."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
