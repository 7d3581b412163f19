"""Which filesystem filled: the home's, the store's or the temporary directory's, each with the
space it had free when the run started, so that a "No space left on device" says where to look.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import BuildError

FULL = "No space left on device"
_PATH = re.compile(r"(/[^\s:'\"]+)")


@dataclass(frozen=True, slots=True)
class Place:
    roles: tuple[str, ...]  # home, store, temporary directory: those on this filesystem
    path: Path
    paths: tuple[Path, ...]  # the directories of those roles
    device: int
    free: int  # bytes free for unprivileged users when the run started


@dataclass(frozen=True, slots=True)
class Space:
    places: tuple[Place, ...]

    @classmethod
    def now(cls, roles: Mapping[str, Path]) -> Space:
        """The free space of each role's filesystem now (one entry per filesystem)."""
        places: list[Place] = []
        for role, path in roles.items():
            found = _existing(path)
            try:
                st, vfs = found.stat(), os.statvfs(found)
            except OSError:
                continue
            same = next((p for p in places if p.device == st.st_dev), None)
            if same is not None:
                places[places.index(same)] = Place(
                    (*same.roles, role), same.path, (*same.paths, path), same.device, same.free
                )
                continue
            free = vfs.f_bavail * vfs.f_frsize
            places.append(Place((role,), path, (path,), st.st_dev, free))
        return cls(tuple(places))

    def explain(self, text: str) -> str | None:
        """The line naming the filesystem that filled, when ``text`` says one did."""
        if FULL not in text or not self.places:
            return None
        place = self._named(text) or self._fullest()
        free_now = _free(place.path)
        now = f", {size_text(free_now)} now" if free_now is not None else ""
        held = " and ".join(", ".join(place.roles).rsplit(", ", 1))
        return (
            f"the filesystem that filled holds the {held} ({place.path}): "
            f"{size_text(place.free)} free when the run started{now}"
        )

    def _named(self, text: str) -> Place | None:
        """The place holding a path that a line saying the error names (a tool's own path,
        /usr/bin/ld, names nothing)."""
        for line in text.splitlines():
            if FULL not in line:
                continue
            for match in _PATH.findall(line):
                hit = next((p for p in self.places if _under(Path(match), p.paths)), None)
                if hit is not None:
                    return hit
        return None

    def _fullest(self) -> Place:
        return min(self.places, key=lambda p: _free(p.path) or 0)


def roles(home: Path, store: Path) -> dict[str, Path]:
    return {"home": home, "store": store, "temporary directory": Path(tempfile.gettempdir())}


@contextlib.contextmanager
def named_when_full(home: Path, store: Path) -> Iterator[None]:
    """A BuildError (or an OSError) saying "No space left on device" inside gets one more
    line: which filesystem filled and what it had free when this block began."""
    space = Space.now(roles(home, store))
    try:
        yield
    except BuildError as exc:
        line = space.explain(exc.message)
        if line is None:
            raise
        raise _with_line(exc, line) from exc
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        text = f"{exc.strerror}: {exc.filename}"
        raise BuildError(f"{text}\n{space.explain(FULL) or ''}".rstrip()) from exc


def _with_line(exc: BuildError, line: str) -> BuildError:
    out = BuildError(f"{exc.message}\n{line}", hint=exc.hint)
    out.exit_code = exc.exit_code
    return out


def _under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (a home not made yet)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _free(path: Path) -> int | None:
    try:
        vfs = os.statvfs(_existing(path))
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize


def size_text(n: int) -> str:
    """``n`` bytes for people: 512 B, 1.5 KiB, 3.2 MiB, 7.0 GiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{n} B"
        size /= 1024
    return f"{n} B"
