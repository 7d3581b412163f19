"""Names matched without importing ``re`` at start-up.

``re`` costs 6.6 ms to import (with ``enum``, which it needs) and the audit's patterns 3.8 ms more
to compile: a fifth of a small wheel's whole audit (50 ms, against auditwheel's 150-200). So the
audit's modules compile their patterns with :func:`lazy`, on first use; those a plain wheel's
audit uses are written as string tests beside their pattern (each checked against it in
``tests/unit/test_matching.py``); ``fnmatch`` and ``glob`` (which import ``re``) are replaced by
:func:`star_match` and :func:`glob_names` for the patterns the audit has.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re
    from typing import AnyStr


class _Lazy:
    """A pattern compiled, and ``re`` imported, the first time one of its methods is asked for;
    then its methods sit on the instance, and calls go straight to them."""

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        import re

        pattern, flags = self._source
        compiled = re.compile(pattern, flags)
        for method in ("match", "fullmatch", "search", "finditer", "findall", "sub", "split"):
            setattr(self, method, getattr(compiled, method))
        self.pattern = compiled.pattern
        return getattr(compiled, name)


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(pattern, flags)``, done when it is first used. Give flags inline
    (``(?m)``, ``(?a)``): ``re.MULTILINE`` itself would import re."""
    made: re.Pattern[AnyStr] = _Lazy(pattern, flags)  # type: ignore[assignment]
    return made


def starts_as(pattern: re.Pattern[str], text: str) -> bool:
    """``pattern.match(text) is not None``; for a :func:`lazy` pattern that is ``^`` and then
    letters, digits, ``_`` or ``-`` only (a vendor's local version: ``^cpu``), a string test,
    without compiling it."""
    source = pattern._source if isinstance(pattern, _Lazy) else None
    if source is not None and isinstance(source[0], str) and not source[1]:
        text_pattern = source[0]
        literal = text_pattern[1:]
        if text_pattern.startswith("^") and all(c.isalnum() or c in "_-" for c in literal):
            return text.startswith(literal)
    return pattern.match(text) is not None


def star_match(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase(name, pattern)``, for patterns of ``*`` and ``?`` without importing
    fnmatch (and re); one with a ``[`` set is left to fnmatch."""
    if "[" in pattern:
        from fnmatch import fnmatchcase

        return fnmatchcase(name, pattern)
    n = p = 0
    star = -1  # the last * seen in the pattern, and where in the name it started matching
    mark = 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]) and pattern[p] != "*":
            n += 1
            p += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, n
            p += 1
        elif star >= 0:  # let the last * take one character more
            mark += 1
            n, p = mark, star + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


_MAGIC = ("*", "?", "[")


def glob_names(pattern: str) -> list[str]:
    """``glob.glob(pattern)`` for a pattern whose wildcards are in its last part (ld.so.conf's
    includes, the musl loader's files), without importing glob (and re)."""
    directory, base = os.path.split(pattern)
    if any(m in directory for m in _MAGIC):
        import glob

        return glob.glob(pattern)
    if not any(m in base for m in _MAGIC):
        if not base:
            return [pattern] if os.path.isdir(directory) else []
        return [pattern] if os.path.lexists(pattern) else []
    try:
        names = os.listdir(directory or os.curdir)
    except OSError:
        return []
    hidden_too = base.startswith(".")
    return [
        os.path.join(directory, name)
        for name in names
        if (hidden_too or not name.startswith(".")) and star_match(name, base)
    ]


_ORIGINS = ("$ORIGIN", "${ORIGIN}")


def has_origin(entry: str) -> bool:
    """Does the search path entry name ``$ORIGIN`` (or ``${ORIGIN}``)?"""
    return any(token in entry for token in _ORIGINS)


def substitute_origin(entry: str, origin: str, *, bounded: bool = False) -> str:
    """``entry`` with each ``$ORIGIN`` and ``${ORIGIN}`` replaced by ``origin``, taken literally:
    ``re.sub`` of auditwheel's ``\\$(ORIGIN|\\{ORIGIN\\})``, or with ``bounded``, of
    ``\\$(ORIGIN\\b|\\{ORIGIN\\})`` (the loader's: ``$ORIGINAL`` is no ``$ORIGIN``)."""
    out: list[str] = []
    i = 0
    while (j := entry.find("$", i)) >= 0:
        token = next((t for t in _ORIGINS if entry.startswith(t, j)), None)
        if token == "$ORIGIN" and bounded:
            after = entry[j + len(token) : j + len(token) + 1]
            token = None if after and (after.isalnum() or after == "_") else token
        if token is None:
            out.append(entry[i : j + 1])
            i = j + 1
        else:
            out += (entry[i:j], origin)
            i = j + len(token)
    out.append(entry[i:])
    return "".join(out)
