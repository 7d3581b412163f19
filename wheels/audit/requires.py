"""Requires-Dist lines: the name read at once, the rest by packaging when a check asks for it.

``packaging.requirements`` costs about 20 ms to import (it brings dataclasses, inspect and,
through packaging.tags, logging, subprocess, platform and sysconfig): more than the whole
audit of a small wheel does. The CLI on aiohttp 3.11's wheel took 198 ms with every line
parsed by packaging, 170 ms without (medians of 15, interleaved). Most lines are of a simple
form, a name with a version range and a marker on ``extra`` or the platform, which
:func:`_simple_name` reads; it reads only lines packaging accepts, and the same name (the
tests hold it to that). Any other line is parsed by packaging as it is read, and its verdict
stands. A line's specifier or marker is parsed when a check asks for them
(:meth:`Requires.parsed`), which only the checks of CUDA runtimes and of libraries from other
distributions do.
"""

from __future__ import annotations

import functools
import re

from wheels.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from packaging.requirements import Requirement

# Each piece a subset of packaging's grammar (packaging._tokenizer, packaging.specifiers).
_WS = r"[ \t]*"
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
# Pre, post and dev releases in every spelling packaging accepts in lower case ("2.0.0b" is
# 2.0.0b0, "1.0-1" is 1.0.post1): a line with "cffi>=2.0.0b" read by packaging costs 20 ms.
_SEP = r"[-_.]?"
_TAIL = (
    rf"(?:{_SEP}(?:alpha|beta|preview|pre|a|b|c|rc){_SEP}[0-9]*)?"
    rf"(?:-[0-9]+|{_SEP}(?:post|rev|r){_SEP}[0-9]*)?"
    rf"(?:{_SEP}dev{_SEP}[0-9]*)?"
)
_SPEC = (
    rf"(?:(?:==|!=){_WS}(?:{_RELEASE}{_TAIL}|{_RELEASE}\.\*)"  # a wildcard only after ==, !=
    rf"|(?:<=|>=|<|>){_WS}{_RELEASE}{_TAIL}"
    rf"|~={_WS}[0-9]+(?:\.[0-9]+)+{_TAIL})"  # ~= needs two release numbers
)
_ONE_SPEC = re.compile(rf"{_WS}{_SPEC}{_WS}")
_FRONT = re.compile(
    rf"{_WS}(?P<name>{_NAME}){_WS}(?:\[{_WS}{_NAME}(?:{_WS},{_WS}{_NAME})*{_WS}\])?"
    r"(?P<specs>[^;]*)"
)
# A marker's tokens, read left to right as packaging's tokenizer reads them: a quoted string is
# one token whatever it holds, a word is as long as it goes.
_TOKEN = re.compile(
    r"""[ \t]+|(?P<open>\()|(?P<close>\))|(?P<quoted>"[^"]*"|'[^']*')"""
    r"|(?P<op>===|==|~=|!=|<=|>=|<|>)|(?P<word>[A-Za-z0-9_.]+)"
)
_VARIABLES = frozenset(
    {
        "python_version",
        "python_full_version",
        "os_name",
        "sys_platform",
        "platform_release",
        "platform_system",
        "platform_version",
        "platform_machine",
        "platform_python_implementation",
        "implementation_name",
        "implementation_version",
        "extra",
    }
)


def _simple_marker(text: str) -> bool:
    """Is ``text`` a marker of comparisons of a variable with a quoted string, joined by
    ``and`` and ``or``, in parentheses or not? (A subset of what packaging accepts.)"""
    kinds: list[str] = []
    at = 0
    while at < len(text):
        token = _TOKEN.match(text, at)
        if token is None:
            return False
        at = token.end()
        kind = token.lastgroup
        if kind is None:  # whitespace
            continue
        if kind == "word":
            word = token.group()
            kind = "bool" if word in ("and", "or") else "var" if word in _VARIABLES else None
            if kind is None:
                return False
        kinds.append(kind)
    return _well_formed(kinds)


_ITEMS = (["var", "op", "quoted"], ["quoted", "op", "var"])


def _well_formed(kinds: list[str]) -> bool:
    """marker: atom (bool atom)*; atom: "(" marker ")" | item; item: var op quoted | quoted op
    var."""
    depth, at, want_atom = 0, 0, True
    while at < len(kinds):
        if want_atom and kinds[at] == "open":
            depth, at = depth + 1, at + 1
        elif want_atom and kinds[at : at + 3] in _ITEMS:
            at, want_atom = at + 3, False
        elif not want_atom and kinds[at] == "close" and depth:
            depth, at = depth - 1, at + 1
        elif not want_atom and kinds[at] == "bool":
            at, want_atom = at + 1, True
        else:
            return False
    return not want_atom and depth == 0


def _simple_name(value: str) -> str | None:
    """The name of a line of the common form, else None: a name, extras, a list of version
    specifiers (in parentheses or not) and a marker (:func:`_simple_marker`)."""
    front, semicolon, marker = value.partition(";")
    simple = _FRONT.fullmatch(front)
    if simple is None or (semicolon and not _simple_marker(marker)):
        return None
    specs = simple["specs"].strip(" \t")
    if specs.startswith("(") and specs.endswith(")"):
        specs = specs[1:-1]
    elif not specs:
        return simple["name"]
    if not all(_ONE_SPEC.fullmatch(spec) for spec in specs.split(",")):
        return None
    return simple["name"]


class InvalidRequires(ValueError):
    """A Requires-Dist line packaging rejects; the message is packaging's."""


@record(frozen=True)
class Requires:
    """One Requires-Dist line: its distribution's name as written, and the line."""

    name: str
    text: str

    def parsed(self) -> Requirement:
        """The line as packaging reads it (imported on first use)."""
        return _parse(self.text)


def read_requires(value: str) -> Requires:
    """One Requires-Dist value; raises :class:`InvalidRequires` when packaging rejects it."""
    name = _simple_name(value)
    if name is not None:
        return Requires(name, value.strip())
    from packaging.requirements import InvalidRequirement

    try:
        return Requires(_parse(value).name, value.strip())
    except InvalidRequirement as exc:
        raise InvalidRequires(str(exc)) from None


@functools.cache
def _parse(text: str) -> Requirement:
    from packaging.requirements import Requirement

    return Requirement(text)
