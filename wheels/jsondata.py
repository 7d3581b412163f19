"""JSON data files read by the scanner ``json`` itself uses (``_json``, the interpreter's C
accelerator), without importing ``json``: its decoder imports ``re`` (with ``enum``, 6.6 ms), and
an audit reads two policy files (the vendors', auditwheel's) on every run. Text the scanner does
not take whole goes to ``json.loads``, for its value or its error (a ``ValueError``).
"""

from __future__ import annotations

import functools
import math

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"  # JSON's (json.decoder.WHITESPACE)


class _Options:
    """What ``_json.make_scanner`` reads off ``json.JSONDecoder()``: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": -math.inf, "Infinity": math.inf, "NaN": math.nan}.__getitem__
    memo: dict[str, str] = {}


@functools.cache
def _scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    try:
        from _json import make_scanner
    except ImportError:  # (an interpreter without the accelerator: json.loads reads it)
        return None
    options: Any = _Options()  # (typeshed asks for a JSONDecoder: it reads these attributes)
    scan: Callable[[str, int], tuple[Any, int]] = make_scanner(options)
    return scan


def loads(text: str) -> Any:
    """``json.loads(text)``; raises ValueError (json.JSONDecodeError) as it does."""
    scan = _scanner()
    if scan is not None:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = scan(text, start)
        except (StopIteration, ValueError):
            pass
        else:
            if not text[end:].strip(_WHITESPACE):
                return value
    import json

    return json.loads(text)


def load_file(path: str) -> Any:
    """The JSON value in the UTF-8 file at ``path``."""
    with open(path, encoding="utf-8") as fh:
        return loads(fh.read())
