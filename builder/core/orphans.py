"""Children that outlive a SIGKILLed builder: recorded by session, stopped by the next build.

Children run in their own sessions (so a terminal's Ctrl-C reaches only the builder, which stops
them in order); the price is that they survive a SIGKILL of the builder. :class:`TrackedChildren`
writes each child's session and start time to a file; :func:`stop_orphans` reads it back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from builder.core import proc
from builder.core.fs import atomic_write


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (to tell a reused pid apart), None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


class TrackedChildren(proc.Children):
    """One component's children, also listed in a file so that a later build can stop them.

    Children run in their own sessions (so a terminal's Ctrl-C reaches only this process, which
    stops them in order); the price is that they survive a SIGKILL of the builder. The file names
    each child's process group and start time.
    """

    def __init__(self, shared: proc.Children, record: Path) -> None:
        super().__init__()
        self.shared = shared
        self.record = record
        self.pids: dict[int, str] = {}
        self.guard = threading.Lock()

    def add(self, p: Any) -> None:
        self.shared.add(p)
        with self.guard:
            self.pids[p.pid] = start_time(p.pid) or "?"
            self._write()

    def discard(self, p: Any) -> None:
        self.shared.discard(p)
        with self.guard:
            self.pids.pop(p.pid, None)
            self._write()

    def _write(self) -> None:
        if not self.pids:
            self.record.unlink(missing_ok=True)
            return
        atomic_write(self.record, "".join(f"{pid} {start}\n" for pid, start in self.pids.items()))


def stop_orphans(record: Path, grace: float = 5.0) -> list[int]:
    """Stop the sessions a killed build left running; returns the session ids stopped.

    Every child was started in a session of its own, and whatever it started (ninja puts each
    compiler in a process group of its own) stays in that session; so the session id, with the
    leader's start time, names everything a killed builder left behind.
    """
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return []
    stopped = []
    for line in lines:
        sid_text, _, start = line.partition(" ")
        sid = int(sid_text)
        now = start_time(sid)
        if now is not None and now != start:
            continue  # the pid was reused: that process is not ours
        if session_members(sid):
            stop_session(sid, grace)
            stopped.append(sid)
    record.unlink(missing_ok=True)
    return stopped


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live (not zombie) process in session ``sid``."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path("/proc", entry.name, "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            out.append((int(entry.name), int(fields[2])))
    return out


def stop_session(sid: int, grace: float) -> None:
    """SIGTERM every process group of the session (ninja then stops its compilers and removes
    their partial outputs), SIGKILL what is left after ``grace`` seconds."""
    for sig, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pgid in {pgid for _, pgid in session_members(sid)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if not session_members(sid):
                return
            time.sleep(0.05)
