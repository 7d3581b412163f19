"""The fork pool (wheels.audit.forks): calls run in forked children, results and errors come
back, a lost child is a LostChild, and no child outlives the pool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wheels.audit.forks import ForkPool, LostChild, usable

ROOT = Path(__file__).resolve().parents[2]


def _echo(value: object) -> object:
    return value


def _big(size: int, tag: bytes) -> bytes:
    return tag * size


def _fail(message: str) -> None:
    raise ValueError(message)


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _die() -> None:
    os._exit(3)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_results_come_back_from_another_process_in_the_order_asked() -> None:
    pool = ForkPool(1)
    try:
        jobs = [pool.submit(_echo, (i, "x" * i)) for i in range(50)]
        assert [j.result() for j in jobs] == [(i, "x" * i) for i in range(50)]
        assert pool.submit(os.getpid).result() != os.getpid()
    finally:
        pool.shutdown()


def test_big_calls_and_results_cross_full_pipes_without_a_deadlock() -> None:
    pool = ForkPool(2)
    try:
        # Each argument and each result is several times a pipe's size, sent back to back.
        jobs = [pool.submit(_echo, b"%d" % i * (3 << 20)) for i in range(4)]
        jobs += [pool.submit(_big, 5 << 20, b"y")]
        assert [len(j.result()) for j in jobs[:4]] == [3 << 20] * 4
        assert jobs[4].result() == b"y" * (5 << 20)
    finally:
        pool.shutdown()


def _strings(count: int) -> tuple[str, list[str], bytes]:
    return "\xe9" + "n" * (4 << 20), [f"s{i}" for i in range(count)], b"z" * (2 << 20)


def test_a_result_written_in_parts_comes_back_whole_after_small_ones() -> None:
    pool = ForkPool(1)
    try:
        # A big string and bytes are handed to the pipe as the pickler gave them, in parts.
        jobs = [pool.submit(_echo, "small"), pool.submit(_strings, 20000), pool.submit(_echo, 1)]
        assert [j.result() for j in jobs] == ["small", _strings(20000), 1]
    finally:
        pool.shutdown()


def test_asking_whether_a_big_result_is_done_reads_all_that_has_begun_to_come() -> None:
    import select

    pool = ForkPool(1)
    try:
        job = pool.submit(_big, 8 << 20, b"z")  # eight times what the pipe holds
        (child,) = pool._children
        assert select.select([child.results], [], [], 60)[0]  # it has begun to come
        assert job.done()  # (so the child is free for its next call)
        assert job.result() == b"z" * (8 << 20)
    finally:
        pool.shutdown()


def test_a_calls_error_is_raised_where_its_result_is_asked_for() -> None:
    pool = ForkPool(1)
    try:
        job = pool.submit(_fail, "no such member")
        with pytest.raises(ValueError, match="no such member"):
            job.result()
        assert isinstance(job.exception(), ValueError)
        assert pool.submit(_echo, 7).result() == 7  # the child goes on
    finally:
        pool.shutdown()


def test_a_child_that_ends_during_a_call_is_a_lost_child_and_takes_no_more() -> None:
    pool = ForkPool(1)
    try:
        job = pool.submit(_die)
        with pytest.raises(LostChild):
            job.result()
        assert job.done() and isinstance(job.exception(), LostChild)
        with pytest.raises(LostChild):
            pool.submit(_echo, 1).result()
    finally:
        pool.shutdown()


def test_a_child_killed_from_outside_is_a_lost_child() -> None:
    pool = ForkPool(1)
    try:
        pid = pool.submit(os.getpid).result()
        job = pool.submit(_pid_after, 30)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(LostChild):
            job.result()
    finally:
        pool.shutdown(wait=False)


def test_shutdown_at_once_ends_a_busy_child_and_reaps_it() -> None:
    pool = ForkPool(2)
    pids = [pool.submit(os.getpid).result() for _ in range(2)]
    busy = pool.submit(_pid_after, 30)
    started = time.monotonic()
    pool.shutdown(wait=False)
    assert time.monotonic() - started < 10
    assert busy.cancelled()
    for pid in set(pids):
        assert _gone(pid)  # (reaped: not even a zombie left)
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    with pytest.raises(RuntimeError):
        pool.submit(_echo, 1)


def test_shutdown_waits_for_the_results_asked_for() -> None:
    pool = ForkPool(1)
    job = pool.submit(_pid_after, 0.3)
    pool.shutdown()
    assert job.done() and not job.cancelled() and job.result() != os.getpid()


def test_each_of_two_children_ends_when_its_own_pipe_is_closed() -> None:
    # The second child must not hold the first's pipe open: shutdown would wait forever.
    code = (
        "import os; from wheels.audit.forks import ForkPool\n"
        "pool = ForkPool(2); pids = {pool.submit(os.getpid).result() for _ in range(4)}\n"
        "pool.shutdown(); print(len(pids))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
        timeout=60,
    ).stdout  # fmt: skip
    assert out.strip() in ("1", "2")


def test_forking_is_not_used_while_another_thread_runs() -> None:
    assert usable()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not usable()
    finally:
        stop.set()
        thread.join()


def test_a_child_leaves_this_processes_buffered_output_and_exit_handlers_alone() -> None:
    code = (
        "import atexit, sys; from wheels.audit.forks import ForkPool\n"
        "atexit.register(lambda: print('exit handler'))\n"
        "sys.stdout.write('buffered '); pool = ForkPool(1)\n"
        "print(pool.submit(len, 'four').result()); pool.shutdown()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out == "buffered 4\nexit handler\n"
