"""JSON data files read by the scanner ``json`` itself uses (``_json``, the interpreter's C
accelerator), without importing ``json``: its decoder imports ``re`` (with ``enum``, 6.6 ms), and
an audit reads two policy files (the vendors', auditwheel's) on every run. Text the scanner does
not take whole goes to ``json.loads``, for its value or its error (a ``ValueError``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"  # JSON's (json.decoder.WHITESPACE)

_INF = float("inf")  # (math.inf, without importing math)


class _Options:
    """What ``_json.make_scanner`` reads off ``json.JSONDecoder()``: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": -_INF, "Infinity": _INF, "NaN": _INF - _INF}.__getitem__
    memo: dict[str, str] = {}


@cache
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


class _Unusual(Exception):
    """A value :func:`dumps` leaves to json (a key that is not a string, an object of no JSON
    type, a cycle)."""


def dumps(value: Any, indent: int = 2) -> str:
    """``json.dumps(value, indent=indent)``, written here for the JSON types with str keys
    (``_json``'s own string quoting; json's indented output is written in Python by json too);
    anything else by json itself, with its errors."""
    quote: Callable[[str], str] | None
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:
        quote = None
    if quote is not None:
        out: list[str] = []
        try:
            _encode(value, quote, out, "\n", " " * indent)
        except (_Unusual, RecursionError):
            pass
        else:
            return "".join(out)
    import json

    return json.dumps(value, indent=indent)


def _encode(
    value: Any, quote: Callable[[str], str], out: list[str], newline: str, step: str
) -> None:
    if isinstance(value, str):
        out.append(quote(value))
    elif value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        text = float.__repr__(value)
        out.append(_FLOATS.get(text, text))
    elif isinstance(value, (dict, list, tuple)):
        _container(value, quote, out, newline, step)
    else:
        raise _Unusual


_FLOATS = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}  # (as json writes them)


def _container(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...],
    quote: Callable[[str], str],
    out: list[str],
    newline: str,
    step: str,
) -> None:
    is_dict = isinstance(value, dict)
    if not value:
        out.append("{}" if is_dict else "[]")
        return
    inner = newline + step
    out.append("{" if is_dict else "[")
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for number, (key, item) in enumerate(items):
        out.append(inner if number == 0 else "," + inner)
        if is_dict:
            if not isinstance(key, str):
                raise _Unusual
            out.append(quote(key))
            out.append(": ")
        _encode(item, quote, out, inner, step)
    out.append(newline + ("}" if is_dict else "]"))
