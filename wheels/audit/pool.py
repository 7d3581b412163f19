"""Every member read once: members in batches, big wheels spread over processes, largest
members first, each batch looked up in the cache before it is read."""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from wheels.audit.cache import Cache
from wheels.audit.members import (
    MemberError,
    MemberScan,
    Raw,
    RawFile,
    Task,
    open_raw,
    read_in_steps,
    read_raw,
    scan_member,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import Future

BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 1024
SERIAL_BELOW = 16 << 20  # wheels that inflate to less than this are read in this process alone


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _run_batch(
    path: Path, batch: Sequence[Task], cache: Cache | None, spare_core: bool = False
) -> tuple[list[MemberScan], bool]:
    # A big member alone: mapped; over a gigabyte read in steps, unless its bytes make the
    # cache key (then read whole, as the small ones are).
    alone = len(batch) == 1 and (cache is None or not read_in_steps(batch[0]))
    raws = [_open_raw(path, batch[0])] if alone else _read_raws(path, batch)
    good = [r for r in raws if isinstance(r, bytes | memoryview)]
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


def _open_raw(path: Path, task: Task) -> Raw | RawFile | MemberError:
    try:
        return open_raw(path, task)
    except MemberError as exc:
        return exc
    except OSError as exc:
        return MemberError(f"cannot open the wheel: {exc}")


def _read_raws(path: Path, batch: Sequence[Task]) -> list[Raw | RawFile | MemberError]:
    raws: list[Raw | RawFile | MemberError] = []
    try:
        with path.open("rb") as fh:
            for task in batch:
                try:
                    raws.append(read_raw(fh.fileno(), task))
                except MemberError as exc:
                    raws.append(exc)
    except OSError as exc:
        raws += [MemberError(f"cannot open the wheel: {exc}")] * (len(batch) - len(raws))
    return raws


def _run_batches(
    path: Path, batches: Sequence[Sequence[Task]], cache: Cache | None, spare_core: bool
) -> list[tuple[list[MemberScan], bool]]:
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


def scan_members(
    path: Path,
    tasks: Sequence[Task],
    cache: Cache | None,
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
    batches: Sequence[Sequence[Task]],
    cache: Cache | None,
    workers: int,
    meanwhile: Callable[[], None],
    while_waiting: Callable[[], None],
) -> list[tuple[list[MemberScan], bool]]:
    """Children take batches from the large end, one at a time; this process from the small end.

    The largest members go to children, whose inflate loops never wait for a GIL held by this
    process's bookkeeping; a batch is handed out only when a child is free, so none is left
    queued behind a long one while this process has nothing to do.
    """
    import pickle  # imported here: a small wheel is read without any of this
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

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
    handed: list[tuple[Sequence[Task], Future[tuple[list[MemberScan], bool]]]] = []
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
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
