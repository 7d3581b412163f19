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

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.requirements import Requirement

# Each piece a subset of packaging's grammar (packaging._tokenizer, packaging.specifiers), read
# by string tests rather than regular expressions (wheels.matching says why); the expressions
# they are held to, in tests/unit/test_matching.py:
#   name      [A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?
#   front     [ \t]*(?P<name>NAME)[ \t]*(?:\[[ \t]*NAME(?:[ \t]*,[ \t]*NAME)*[ \t]*\])?
#             (?P<specs>[^;]*)
#   release   [0-9]+(?:\.[0-9]+)*
#   tail      (?:SEP(?:alpha|beta|preview|pre|a|b|c|rc)SEP[0-9]*)?
#             (?:-[0-9]+|SEP(?:post|rev|r)SEP[0-9]*)?(?:SEP dev SEP[0-9]*)?, SEP [-_.]?
#             (every lowercase spelling packaging accepts: "2.0.0b" is 2.0.0b0, "1.0-1" is
#             1.0.post1; a line with "cffi>=2.0.0b" read by packaging costs 20 ms)
#   spec      [ \t]*(?:(?:==|!=)[ \t]*(?:RELEASE TAIL|RELEASE\.\*)|(?:<=|>=|<|>)[ \t]*RELEASE TAIL
#             |~=[ \t]*[0-9]+(?:\.[0-9]+)+TAIL)[ \t]*   (a wildcard only after == and !=; ~= needs
#             two release numbers)
#   token     [ \t]+|(?P<open>\()|(?P<close>\))|(?P<quoted>"[^"]*"|'[^']*')
#             |(?P<op>===|==|~=|!=|<=|>=|<|>)|(?P<word>[A-Za-z0-9_.]+)
_WS = " \t"
_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_INNER = _ALNUM | frozenset("._-")
_WORD = _ALNUM | frozenset("_.")
_SEPARATORS = "-_."
_PRE = ("preview", "alpha", "beta", "pre", "rc", "a", "b", "c")  # longest first
_POST = ("post", "rev", "r")
_OPERATORS = ("===", "==", "~=", "!=", "<=", ">=", "<", ">")


def _skip(text: str, at: int, chars: str | frozenset[str]) -> int:
    """The end of the run of ``chars`` in ``text`` from ``at``."""
    while at < len(text) and text[at] in chars:
        at += 1
    return at


def _name_end(text: str, at: int) -> int:
    """The end of the longest name at ``at`` (``at`` itself when there is none)."""
    if at >= len(text) or text[at] not in _ALNUM:
        return at
    end = _skip(text, at, _NAME_INNER)
    while text[end - 1] not in _ALNUM:  # it ends in a letter or digit
        end -= 1
    return end


def _extras_end(text: str, at: int) -> int:
    """The end of a list of extras (``[a, b]``) at ``at``; ``at`` when there is none."""
    if not text.startswith("[", at):
        return at
    i = _skip(text, at + 1, _WS)
    while True:
        end = _name_end(text, i)
        if end == i:
            return at
        i = _skip(text, end, _WS)
        if text.startswith("]", i):
            return i + 1
        if not text.startswith(",", i):
            return at
        i = _skip(text, i + 1, _WS)


def _component(text: str, at: int, words: tuple[str, ...]) -> int:
    """The end of SEP WORD SEP DIGITS* at ``at``, for one of ``words``; ``at`` when absent."""
    i = at + 1 if text[at : at + 1] and text[at] in _SEPARATORS else at
    word = next((w for w in words if text.startswith(w, i)), None)
    if word is None:
        return at
    i += len(word)
    i = i + 1 if text[i : i + 1] and text[i] in _SEPARATORS else i
    return _skip(text, i, _DIGITS)


def _tail_end(text: str, at: int) -> int:
    """The end of a version's pre-, post- and dev-release parts at ``at``."""
    at = _component(text, at, _PRE)
    if text.startswith("-", at) and text[at + 1 : at + 2] and text[at + 1] in _DIGITS:
        at = _skip(text, at + 1, _DIGITS)
    else:
        at = _component(text, at, _POST)
    return _component(text, at, ("dev",))


def _release_end(text: str, at: int) -> tuple[int, int]:
    """(end, how many numbers) of the release at ``at``; (``at``, 0) when there is none."""
    end = _skip(text, at, _DIGITS)
    if end == at:
        return at, 0
    numbers = 1
    while text.startswith(".", end) and text[end + 1 : end + 2] and text[end + 1] in _DIGITS:
        end = _skip(text, end + 1, _DIGITS)
        numbers += 1
    return end, numbers


def _one_spec(text: str) -> bool:
    """Is ``text`` one version specifier of the common form (``spec`` above), whole?"""
    at = _skip(text, 0, _WS)
    op = next((o for o in _OPERATORS[1:] if text.startswith(o, at)), None)
    if op is None:
        return False
    at = _skip(text, at + len(op), _WS)
    release, numbers = _release_end(text, at)
    if numbers == 0 or (op == "~=" and numbers < 2):
        return False
    ends = [_tail_end(text, release)]
    if op in ("==", "!=") and text.startswith(".*", release):
        ends.append(release + 2)
    return any(_skip(text, end, _WS) == len(text) for end in ends)


def _tokens(text: str) -> list[str] | None:
    """The kinds of a marker's tokens (``token`` above: open, close, quoted, op, or the word
    itself), whitespace left out; None at a character no token starts with."""
    kinds: list[str] = []
    at = 0
    while at < len(text):
        char = text[at]
        if char in _WS:
            at = _skip(text, at, _WS)
            continue
        if char in "()":
            kinds.append("open" if char == "(" else "close")
            at += 1
        elif char in "\"'":
            close = text.find(char, at + 1)
            if close < 0:
                return None
            kinds.append("quoted")
            at = close + 1
        elif op := next((o for o in _OPERATORS if text.startswith(o, at)), None):
            kinds.append("op")
            at += len(op)
        elif char in _WORD:
            end = _skip(text, at, _WORD)
            kinds.append("word:" + text[at:end])
            at = end
        else:
            return None
    return kinds


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
    tokens = _tokens(text)
    if tokens is None:
        return False
    kinds = [_kind(token) for token in tokens]
    return all(kinds) and _well_formed(kinds)


def _kind(token: str) -> str:
    """A token's kind for :func:`_well_formed`; a word is ``bool`` (and, or) or ``var`` (a
    marker variable), any other word "" (no simple marker has it)."""
    if not token.startswith("word:"):
        return token
    word = token[5:]
    return "bool" if word in ("and", "or") else "var" if word in _VARIABLES else ""


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
    start = _skip(front, 0, _WS)
    end = _name_end(front, start)
    if end == start or (semicolon and not _simple_marker(marker)):
        return None
    name = front[start:end]
    specs = front[_extras_end(front, _skip(front, end, _WS)) :].strip(_WS)
    if specs.startswith("(") and specs.endswith(")"):
        specs = specs[1:-1]
    elif not specs:
        return name
    if not all(_one_spec(spec) for spec in specs.split(",")):
        return None
    return name


class InvalidRequires(ValueError):
    """A Requires-Dist line packaging rejects; the message is packaging's."""


@dataclass(frozen=True)
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


@cache
def _parse(text: str) -> Requirement:
    from packaging.requirements import Requirement

    return Requirement(text)
