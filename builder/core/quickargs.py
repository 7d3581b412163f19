"""A command's options declared once, for argparse and for a plain command line read without it.

``audit`` of one small wheel takes tens of milliseconds, and argparse alone took 5.5 of them
(2.4 ms to import it with gettext, 3.1 ms to build the parser). A command declares its options
as :class:`Option` rows; :func:`add_to` gives them to argparse, and :func:`parse` reads a
command line made only of those options, spelled out in full, with its positional words in one
run. Anything else (``--help``, an abbreviation, ``-j4``, ``--``, an unknown option, a value
that does not convert, a word argparse would refuse) returns None, and argparse parses it, with
its errors and help. Where :func:`parse` answers, its namespace equals argparse's
(``tests/unit/test_quickargs.py`` compares them).

Imports nothing: the command's start-up is what it is for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any


class Option:
    """One option: its spellings, where it goes, how it is read (``flag``: store_true,
    ``value``: store, ``append``: each value added to a list), and what argparse is told."""

    __slots__ = ("convert", "default", "dest", "help", "how", "metavar", "names")

    def __init__(
        self,
        names: tuple[str, ...],
        how: str,
        help: str,
        *,
        convert: Callable[[str], Any] | None = None,
        default: Any = None,
        metavar: str | None = None,
    ) -> None:
        self.names = names
        self.dest = names[0].lstrip("-").replace("-", "_")
        self.how = how
        self.convert = convert
        if default is None and how != "value":
            default = [] if how == "append" else False
        self.default = default
        self.metavar = metavar
        self.help = help

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        extra: dict[str, Any] = {} if self.metavar is None else {"metavar": self.metavar}
        if self.how == "flag":
            parser.add_argument(*self.names, action="store_true", help=self.help)
            return
        if self.convert is not None:
            extra["type"] = self.convert
        action = "append" if self.how == "append" else "store"
        default = list(self.default) if self.how == "append" else self.default
        parser.add_argument(*self.names, action=action, default=default, help=self.help, **extra)


class Namespace:
    """What :func:`parse` returns: argparse.Namespace's attributes and equality, without it."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    __hash__ = None  # type: ignore[assignment]  # (as argparse.Namespace: equal by value)

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other) if hasattr(other, "__dict__") else NotImplemented

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in sorted(vars(self).items()))})"


def parse(
    words: Sequence[str],
    options: Sequence[Option],
    positional: tuple[str, Callable[[str], Any]],
    fixed: dict[str, Any],
) -> Namespace | None:
    """``words`` (after the command's name) read as argparse would read them with ``options``
    and one positional of ``nargs="+"`` (its dest, its type), plus the ``fixed`` values
    (``command``, ``handler``); None where argparse must read them itself."""
    by_name = {name: option for option in options for name in option.names}
    values: dict[str, Any] = {o.dest: _fresh(o.default) for o in options}
    dest, convert = positional
    found: list[Any] = []
    previous_positional = False
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-":  # (standard input, to argparse)
            return None
        if not word.startswith("-"):
            if found and not previous_positional:
                return None  # a second run of positional words: argparse refuses it
            converted = _converted(convert, word)
            if converted is _REFUSED:
                return None
            found.append(converted)
            previous_positional = True
            i += 1
            continue
        previous_positional = False
        name, equals, value = word.partition("=")
        option = by_name.get(name if equals and name.startswith("--") else word)
        if option is None:
            return None
        if option.how == "flag":
            if equals:  # (argparse: "ignored explicit argument")
                return None
            values[option.dest] = True
            i += 1
            continue
        if not equals:
            if i + 1 >= len(words) or words[i + 1].startswith("-"):
                return None
            value = words[i + 1]
            i += 1
        i += 1
        converted = _converted(option.convert, value)
        if converted is _REFUSED:
            return None
        if option.how == "append":
            values[option.dest].append(converted)
        else:
            values[option.dest] = converted
    if not found:
        return None
    return Namespace(**values, **{dest: found}, **fixed)


_REFUSED = object()


def _converted(convert: Callable[[str], Any] | None, text: str) -> Any:
    if convert is None:
        return text
    try:
        return convert(text)
    except Exception:  # (argparse says what was wrong with it)
        return _REFUSED


def _fresh(default: Any) -> Any:
    return list(default) if isinstance(default, list) else default
