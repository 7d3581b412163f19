"""Lines that fit a terminal: wrapped at its width with hanging indents, paths broken at ``/``.

Pure functions (text and a width in, lines out) and :func:`terminal_width`, which gives a width
only for a terminal: logs, pipes and files get ``None``, and ``None`` means whole lines, exactly
as they were.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import TextIO

HANG = 4  # how much further a continuation line is indented than the line it continues
NARROWEST = 20  # below this, a terminal's width is taken as this


def terminal_width(stream: TextIO, environ: Mapping[str, str] | None = None) -> int | None:
    """The width to fit ``stream``'s lines to, or ``None`` when it is not a terminal.

    ``COLUMNS`` (a positive integer) wins over the width the terminal reports, as in
    :func:`shutil.get_terminal_size`, which asks standard output rather than ``stream``."""
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return None
    columns = (os.environ if environ is None else environ).get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return max(int(columns), NARROWEST)
    try:
        return max(os.get_terminal_size(stream.fileno()).columns, NARROWEST)
    except (AttributeError, ValueError, OSError):
        return 80


def fit(text: str, width: int | None, hang: int = HANG) -> str:
    """``text`` with each line wrapped to ``width``; unchanged when ``width`` is ``None``."""
    if width is None:
        return text
    return "\n".join(fit_lines(text.split("\n"), width, hang))


def fit_lines(lines: Iterable[str], width: int | None, hang: int = HANG) -> list[str]:
    """Each of ``lines`` wrapped to ``width`` (see :func:`wrap`); as given when ``None``."""
    if width is None:
        return list(lines)
    return [part for line in lines for part in wrap(line, width, hang)]


def wrap(line: str, width: int, hang: int = HANG) -> list[str]:
    """``line`` as lines of at most ``width`` columns: broken at spaces, continuation lines
    indented ``hang`` further than ``line``'s own indent; a word longer than a line (a path) is
    broken after a ``/`` (or ``,``, ``=``, ``;``), and only where it has none, anywhere."""
    line = line.rstrip()
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = min(len(line) - len(body), width // 2)
    more = min(indent + hang, width // 2)
    room = width - more  # for each continuation line's text
    out: list[str] = []
    current = " " * indent
    bare = True  # nothing after the indent yet
    for word, spaces in _pieces(body, room):
        gap = "" if bare else " " * spaces
        if len(current) + len(gap) + len(word) <= width:
            current += gap + word
        else:
            out.append(current)
            current = " " * more + word
        bare = False
    out.append(current)
    return out


def _pieces(body: str, room: int) -> list[tuple[str, int]]:
    """``body``'s words, each with the number of spaces before it (kept, so a table's columns
    stay apart); words longer than ``room`` are split into parts of at most ``room``, the parts
    after the first with no space before them."""
    pieces: list[tuple[str, int]] = []
    spaces = 0
    for word in body.split(" "):
        spaces += 1
        if not word:
            continue
        parts = split_word(word, room)
        pieces.append((parts[0], spaces))
        pieces.extend((part, 0) for part in parts[1:])
        spaces = 0
    return pieces


def split_word(word: str, room: int) -> list[str]:
    """``word`` in parts of at most ``room`` characters, each ending at a separator where one
    is found within ``room`` (a path breaks after a ``/``, so each part reads as a prefix)."""
    room = max(room, 1)
    parts: list[str] = []
    while len(word) > room:
        cut = max(word.rfind(sep, 1, room) for sep in "/,=;") + 1
        cut = cut if cut > 0 else room
        parts.append(word[:cut])
        word = word[cut:]
    parts.append(word)
    return parts
