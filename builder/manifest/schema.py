"""YAML with line/column marks, typed getters that locate their errors, and an error collector.

Every problem is reported as ``FILE:LINE:COL: message``; loading collects them all and raises
one :class:`ManifestError` at the end, so a user fixes a file in one pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.core.errors import ManifestError

Key = tuple[str | int, ...]


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class Doc:
    """One parsed YAML file: plain data plus the mark of every value and every mapping key."""

    label: str
    data: Any
    marks: dict[Key, Mark] = field(default_factory=dict)
    key_marks: dict[Key, Mark] = field(default_factory=dict)


@dataclass
class Problems:
    items: list[str] = field(default_factory=list)

    def add(self, doc: Doc, key: Key, message: str, *, on_key: bool = False) -> None:
        self.items.append(f"{locate(doc, key, on_key=on_key)}: {message}")

    def add_plain(self, message: str) -> None:
        self.items.append(message)

    def raise_if_any(self) -> None:
        if self.items:
            raise ManifestError(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


def locate(doc: Doc, key: Key, *, on_key: bool = False) -> str:
    table = doc.key_marks if on_key else doc.marks
    probe = key
    while probe not in table and probe:
        probe = probe[:-1]
    mark = table.get(probe) or doc.marks.get(probe) or Mark(1, 1)
    return f"{doc.label}:{mark.line}:{mark.col}"


def dotted(key: Key) -> str:
    return ".".join(str(k) for k in key) or "(top level)"


def label_for(path: Path) -> str:
    """The file as a person would name it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_doc(path: Path, problems: Problems) -> Doc | None:
    label = label_for(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add_plain(f"{label}: file not found")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.add_plain(f"{label}: cannot read: {exc}")
        return None
    return parse_doc(text, label, problems)


def parse_doc(text: str, label: str, problems: Problems) -> Doc | None:
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{label}:{mark.line + 1}:{mark.column + 1}" if mark else label
        problems.add_plain(f"{where}: invalid YAML: {exc.problem or exc.context}")
        return None
    except yaml.YAMLError as exc:
        problems.add_plain(f"{label}: invalid YAML: {exc}")
        return None
    doc = Doc(label=label, data=None)
    if node is None:
        doc.data = {}
        return doc
    try:
        doc.data = _convert(node, (), doc, problems)
    except yaml.YAMLError as exc:  # e.g. a bad timestamp or an unresolvable tag
        problems.add_plain(f"{label}: invalid YAML value: {exc}")
        return None
    return doc


# libyaml's parser when PyYAML was built with it; its nodes carry the same marks.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# One constructor for every scalar: the safe loader's resolvers (ints, bools, floats ...).
_SCALARS = yaml.SafeLoader("")


def _mark(node: yaml.Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(node: yaml.Node, key: Key, doc: Doc, problems: Problems) -> Any:
    doc.marks[key] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            name = _scalar(knode)
            child = (*key, str(name))
            doc.key_marks[child] = _mark(knode)
            if str(name) in out:
                problems.add(doc, child, f"duplicate key '{name}'", on_key=True)
                continue
            out[str(name)] = _convert(vnode, child, doc, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*key, i), doc, problems) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return _SCALARS.construct_object(node, deep=True)


@dataclass
class Reader:
    """Typed access to one Doc: wrong types and unknown keys become located problems."""

    doc: Doc
    problems: Problems

    def get(self, key: Key) -> Any:
        value: Any = self.doc.data
        for part in key:
            if isinstance(value, dict) and isinstance(part, str):
                value = value.get(part)
            elif isinstance(value, list) and isinstance(part, int) and part < len(value):
                value = value[part]
            else:
                return None
        return value

    def has(self, key: Key) -> bool:
        parent = self.get(key[:-1]) if key else None
        return isinstance(parent, dict) and key[-1] in parent

    def error(self, key: Key, message: str, *, on_key: bool = False) -> None:
        self.problems.add(self.doc, key, message, on_key=on_key)

    def mapping(self, key: Key, *, required: bool = False) -> dict[str, Any]:
        value = self.get(key)
        if value is None:
            if required and not self.has(key):
                self.error(key[:-1], f"missing required key '{dotted(key)}'")
            return {}
        if not isinstance(value, dict):
            self.error(key, f"'{dotted(key)}' must be a mapping, not {_kind(value)}")
            return {}
        return value

    def string(self, key: Key, *, required: bool = False, default: str | None = None) -> str | None:
        value = self.get(key)
        if value is None:
            if required:
                self.error(key[:-1], f"missing required key '{dotted(key)}'")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(key, f"'{dotted(key)}' must be a string, not {_kind(value)}")
            return default
        return str(value)

    def boolean(self, key: Key, *, default: bool = False) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(key, f"'{dotted(key)}' must be true or false, not {_kind(value)}")
            return default
        return value

    def strings(self, key: Key) -> tuple[str, ...]:
        value = self.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.error(key, f"'{dotted(key)}' must be a list, not {_kind(value)}")
            return ()
        out: list[str] = []
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                self.error((*key, i), f"'{dotted(key)}[{i}]' must be a string, not {_kind(item)}")
            else:
                out.append(str(item))
        return tuple(out)

    def cmake_options(self, key: Key) -> dict[str, str]:
        """A mapping of CMake cache variables; YAML booleans become ON/OFF, lists join with ';'."""
        out: dict[str, str] = {}
        for name, value in self.mapping(key).items():
            where = (*key, name)
            if isinstance(value, bool):
                out[name] = "ON" if value else "OFF"
            elif isinstance(value, (str, int, float)):
                out[name] = str(value)
            elif isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
                out[name] = ";".join(str(v) for v in value)
            else:
                self.error(where, f"option '{name}' must be a scalar or a list, not {_kind(value)}")
        return out

    def check_keys(self, key: Key, allowed: Iterable[str]) -> None:
        """Report every key of the mapping at ``key`` that is not allowed, with a did-you-mean."""
        value = self.get(key)
        if not isinstance(value, dict):
            return
        names = sorted(allowed)
        for name in value:
            if name not in names:
                self.error((*key, name), unknown_message("key", name, names, key), on_key=True)


def unknown_message(kind: str, name: str, known: Iterable[str], where: Key = ()) -> str:
    known = sorted(known)
    place = f" in '{dotted(where)}'" if where else ""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown {kind} '{name}'{place}; did you mean '{close[0]}'?"
    return f"unknown {kind} '{name}'{place}; expected one of: {', '.join(known)}"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"
