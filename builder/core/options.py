"""Path options checked before any work starts (exit 2): a directory option naming a file, a file
option naming a directory or inside one that cannot be written."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

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
        if path is not None and os.path.exists(path) and not os.path.isdir(path):
            _refuse(f"{option} {path} is a file, not a directory")
    for dest, option in FILE_OPTIONS:
        path = _path(args, dest)
        if path is None:
            continue
        if os.path.isdir(path):
            _refuse(f"{option} {path} is a directory; name the file to write")
        parent = nearest_existing(os.path.dirname(os.path.abspath(path)))
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            _refuse(f"{option} {path}: {parent} cannot be written")


def _path(args: argparse.Namespace, dest: str) -> str | None:
    value = getattr(args, dest, None)
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else None


def _refuse(message: str) -> None:
    from builder.core.errors import UsageError

    raise UsageError(message)


def nearest_existing(path: str) -> str:
    """``path`` or the nearest of its parents that exists."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path
