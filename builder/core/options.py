"""Path options checked before any work starts (exit 2): a directory option naming a file, a file
option naming a directory or inside one that cannot be written. Imported by every command (an
audit's start-up counts its modules): os and pathlib, which every command has imported already."""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import argparse

# Options naming a directory the command writes into (dest, option), and those naming a file.
DIRECTORY_OPTIONS = (("home", "--home"), ("store", "--store"))
OUT_DIRECTORY_COMMANDS = frozenset({"wheel", "presets"})  # whose --out is a directory
FILE_OPTIONS = (("html", "--html"),)


def check_options(args: argparse.Namespace) -> None:
    """Raise :class:`~builder.core.errors.UsageError` for the first path option of ``args``
    that cannot be used."""
    directories = list(DIRECTORY_OPTIONS)
    if getattr(args, "command", None) in OUT_DIRECTORY_COMMANDS:
        directories.append(("out", "--out"))
    for dest, option in directories:
        path = _path(args, dest)
        if path is not None and path.exists() and not path.is_dir():
            _refuse(f"{option} {path} is a file, not a directory")
    for dest, option in FILE_OPTIONS:
        path = _path(args, dest)
        if path is None:
            continue
        if path.is_dir():
            _refuse(f"{option} {path} is a directory; name the file to write")
        parent = nearest_existing(path.absolute().parent)
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            _refuse(f"{option} {path}: {parent} cannot be written")


def _path(args: argparse.Namespace, dest: str) -> Path | None:
    value = getattr(args, dest, None)
    return Path(value) if isinstance(value, (str, os.PathLike)) else None


def _refuse(message: str) -> None:
    from builder.core.errors import UsageError

    raise UsageError(message)


def nearest_existing(path: Path) -> Path:
    """``path`` or the nearest of its parents that exists."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path
