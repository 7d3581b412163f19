"""The store, its locks, the job budget and orphan stopping, without compilers."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from builder.core import orphans
from builder.core.layout import Layout
from builder.engine import executor
from builder.engine.store import (
    RECORD,
    Store,
    disk_usage,
    file_lock,
    try_file_lock,
)

KEY = "ab" * 32


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(Layout.from_env({}, home=tmp_path / "home"))


def stage(store: Store, key: str = KEY) -> Path:
    staging = store.begin(key)
    (staging / "prefix" / "lib").mkdir(parents=True)
    (staging / "prefix" / "lib" / "libx.so").write_bytes(b"\x7fELF")
    return staging


def test_an_entry_exists_only_once_committed_with_its_record(store: Store) -> None:
    stage(store)
    assert not store.has(KEY)
    assert store.entries() == []
    entry = store.commit(KEY, {"key": KEY})
    assert store.has(KEY)
    assert store.entries() == [KEY[:32]]
    record = store.record(KEY)
    assert record["key"] == KEY and record["manifest"]["files"] == 1
    assert (entry / "prefix" / "lib" / "libx.so").is_file()
    assert (entry / "manifest.json").is_file()
    assert not store.layout.staging(KEY).exists()
    assert not list(entry.glob("*.tmp"))


def test_begin_discards_what_a_killed_build_staged(store: Store) -> None:
    staging = stage(store)
    (staging / (RECORD + ".tmp")).write_text("{half")
    fresh = store.begin(KEY)
    assert list(fresh.iterdir()) == []
    assert store.leftovers() == [fresh]


def test_a_staged_entry_without_a_record_is_no_entry(store: Store) -> None:
    staging = stage(store)
    staging.rename(store.layout.entry(KEY))  # as if renamed by hand, without the record
    assert not store.has(KEY)
    assert store.entries() == []
    assert store.leftovers() == [store.layout.entry(KEY)]


def test_remove_makes_the_entry_disappear_as_a_whole(store: Store) -> None:
    stage(store)
    store.commit(KEY, {"key": KEY})
    store.remove(KEY[:32])
    assert not store.has(KEY)
    assert [p.name for p in store.layout.store_root.iterdir() if not p.name.startswith(".")] == []
    assert store.leftovers() == []


def test_commit_keeps_an_existing_entry(store: Store) -> None:
    stage(store)
    store.commit(KEY, {"key": KEY, "n": 1})
    stage(store)
    store.commit(KEY, {"key": KEY, "n": 2})
    assert store.record(KEY)["n"] == 1


def test_file_lock_makes_a_second_holder_wait_and_tells_it_whom_for(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "x.lock"
    heard: list[str] = []
    order: list[str] = []
    with file_lock(lock):

        def second() -> None:
            with file_lock(lock, on_wait=heard.append):
                order.append("second")

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        order.append("first done")
    thread.join(5)
    assert order == ["first done", "second"]
    assert heard == [f"process {os.getpid()}"]


def test_try_file_lock_reports_a_held_lock(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with file_lock(lock), try_file_lock(lock) as free:
        assert not free
    with try_file_lock(lock) as free:
        assert free


def test_entry_locks_live_with_the_store_so_homes_sharing_it_share_them(tmp_path: Path) -> None:
    one = Layout.from_env({}, home=tmp_path / "a", store=tmp_path / "s")
    two = Layout.from_env({}, home=tmp_path / "b", store=tmp_path / "s")
    assert one.entry_locks() == two.entry_locks()
    with Store(one).lock(KEY), Store(two).try_lock(KEY[:32]) as free:
        assert not free


@pytest.mark.parametrize(("free", "ready"), [(8, 1), (8, 3), (2, 5), (1, 1), (0, 3), (7, 2)])
def test_job_shares_never_exceed_the_budget_and_give_each_at_least_one(
    free: int, ready: int
) -> None:
    shares = executor.shares(free, ready)
    assert sum(shares) <= free
    assert all(s >= 1 for s in shares)
    assert len(shares) == min(free, ready)
    if shares:
        assert max(shares) - min(shares) <= 1


def test_stop_orphans_stops_a_dead_builders_children_session(tmp_path: Path) -> None:
    child = subprocess.Popen(
        ["sh", "-c", "sleep 60 & sleep 60; wait"],
        start_new_session=True,
    )
    record = tmp_path / "x.running"
    start = orphans.start_time(child.pid)
    record.write_text(f"{child.pid} {start}\n")
    time.sleep(0.1)
    assert orphans.session_members(child.pid)
    assert orphans.stop_orphans(record, grace=2) == [child.pid]
    child.wait(5)
    assert orphans.session_members(child.pid) == []
    assert not record.exists()


def test_stop_orphans_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        record = tmp_path / "x.running"
        record.write_text(f"{child.pid} 1\n")  # another start time: not the process we started
        assert orphans.stop_orphans(record) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_disk_usage_counts_hard_links_once(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    once = disk_usage(tmp_path)
    os.link(tmp_path / "a", tmp_path / "b")
    assert disk_usage(tmp_path) == once
