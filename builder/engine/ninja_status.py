"""A compile followed through Ninja's status lines: edges done of the total, the rate, the time
left.

The build step runs with ``NINJA_STATUS`` set to :data:`NINJA_STATUS` (``[%f/%t] ``: finished
and total edges), so every line Ninja prints for an edge it starts begins with a status this
module reads whatever the user's own ``NINJA_STATUS`` says. :class:`Compile` turns those
counts into what a person wants to see (``195/236, 2.4/s, about 17s left``), and
:class:`Throttle` lets a plain log have that line at most once a minute per component.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

NINJA_STATUS = "[%f/%t] "
_STATUS = re.compile(r"^\[(\d+)/(\d+)\] ")
PLAIN_EVERY = 60.0  # seconds between two progress lines of one component in a log

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Status:
    done: int
    total: int


def parse(line: str) -> Status | None:
    """The edges finished and in all of a Ninja status line, or None for any other line."""
    found = _STATUS.match(line)
    if found is None:
        return None
    done, total = int(found[1]), int(found[2])
    return Status(done, total) if 0 <= done <= total else None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Where a compile stands: ``done`` of ``total`` edges, edges a second, seconds left."""

    done: int
    total: int
    rate: float | None
    left: float | None

    def render(self) -> str:
        parts = [f"{self.done}/{self.total}"]
        if self.rate is not None:  # a slow compile (heavy C++ on few cores) in edges a minute
            parts.append(f"{self.rate:.1f}/s" if self.rate >= 0.1 else f"{self.rate * 60:.1f}/min")
        if self.left is not None:
            parts.append(f"about {duration(self.left)} left")
        return ", ".join(parts)


def duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


@dataclass(slots=True)
class Compile:
    """One component's compile, from its first status line on; ``clock`` is injectable."""

    started: float
    latest: Status = field(default_factory=lambda: Status(0, 0))

    def update(self, status: Status) -> None:
        self.latest = status

    def snapshot(self, now: float) -> Snapshot:
        done, total = self.latest.done, self.latest.total
        elapsed = now - self.started
        rate = done / elapsed if done and elapsed > 0 else None
        left = (total - done) / rate if rate else None
        return Snapshot(done, total, rate, left)


class Throttle:
    """At most one ``True`` per key every ``every`` seconds, the first a full period after
    :meth:`start` (a short compile says nothing)."""

    def __init__(self, every: float = PLAIN_EVERY) -> None:
        self.every = every
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def start(self, key: str, now: float) -> None:
        with self._lock:
            self._last[key] = now

    def due(self, key: str, now: float) -> bool:
        with self._lock:
            last = self._last.setdefault(key, now)
            if now - last < self.every:
                return False
            self._last[key] = now
            return True

    def stop(self, key: str) -> None:
        with self._lock:
            self._last.pop(key, None)
