"""What the loader and an audit need to know about one ELF file: :class:`ElfInfo`, plain data.

It crosses process boundaries (the audit's pool) and is kept in the audit cache
(:mod:`wheels.elf.records`), so it holds strings, numbers and frozen collections only.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Mapping


class Lookup(Protocol):
    """What answers :meth:`ElfInfo.defines` until the symbols are decoded (None: decode
    them now): :class:`wheels.elf.lookup.HashedSymbols`."""

    def defines(self, name: str, version: str) -> bool | None: ...


# The fields the dynamic symbols make: what a library read with its symbols for later
# (ElfInfo.symbols_later) decodes on first use.
SYMBOL_FIELDS = frozenset(
    {
        "export_names",
        "export_versions",
        "def_versions",
        "hidden_versioned",
        "undefined",
        "undefined_versions",
        "undefined_weak",
        "entry_points",
        "uses_pyfpe",
        "uses_ucs2",
    }
)
INDEX_ABOVE = 16 << 20  # export lists this long (characters) are looked up by an ExportIndex
_LATER = "_symbols_later"  # (instance dict key: the lookup, and how to decode them)


@dataclass(frozen=True, slots=True)
class VersionNeed:
    """One DT_VERNEED entry: versions this object needs from the library named ``file``."""

    file: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class ElfInfo:
    """What the loader and an audit need to know about one ELF file."""

    elf_class: int
    little_endian: bool
    machine: int
    osabi: int
    elf_type: int
    arch: str | None
    arch_error: str | None
    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    has_symbols: bool
    has_versym: bool
    export_names: str  # names of non-hidden definitions, NUL-separated (see ``exports``)
    export_versions: str  # each one's version: chr(its index in def_versions), NUL for none
    def_versions: tuple[str, ...]  # the version defined at each index ("" where none is)
    hidden_versioned: frozenset[str]  # ``name@version`` of hidden definitions with a version
    undefined: tuple[str, ...]
    undefined_versions: tuple[str, ...]
    undefined_weak: tuple[str, ...]
    entry_points: frozenset[str]
    uses_pyfpe: bool
    uses_ucs2: bool
    isa_ext: str | None
    isa_error: bool

    @classmethod
    def symbols_later(
        cls,
        values: Mapping[str, object],
        lookup: Lookup,
        decode: Callable[[], Mapping[str, object]],
    ) -> ElfInfo:
        """An ElfInfo of every field in ``values``, its :data:`SYMBOL_FIELDS` made by ``decode``
        when one of them is first read; until then :meth:`defines` asks ``lookup`` (a host
        library's few lookups cost less than decoding its thousands of definitions)."""
        info = cls.__new__(cls)
        info.__dict__.update(values)
        info.__dict__[_LATER] = (lookup, decode)
        return info

    if not TYPE_CHECKING:  # (a type checker would take it that every name is an attribute)

        def __getattr__(self, name: str) -> object:
            later = self.__dict__.get(_LATER)
            if later is None or name not in SYMBOL_FIELDS:
                raise AttributeError(f"'ElfInfo' object has no attribute {name!r}")
            self.__dict__.update(later[1]())
            return self.__dict__[name]

    def __reduce__(self) -> tuple[Callable[..., ElfInfo], tuple[object, ...]]:
        # Pickling 100,000 symbol names one by one is slow: ship each set as one NUL-joined
        # string (a name cannot hold NUL: string tables end names with it).
        values = tuple(
            ("\0".join(v), type(v) is frozenset, len(v)) if _is_strings(v) else (v, None, 0)
            for v in (getattr(self, name) for name in FIELD_NAMES)
        )
        return _unpack_info, (values,)

    @cached_property
    def exports(self) -> frozenset[str]:
        """Built on first use: most ELFs' tens of thousands of names are never looked up."""
        return frozenset(self.export_names.split("\0")) if self.export_names else frozenset()

    @cached_property
    def exports_versioned(self) -> frozenset[str]:
        """``name@version`` of every definition with a version, hidden or not."""
        names = self.export_names.split("\0") if self.export_versions else []
        found = {
            f"{n}@{self.def_versions[ord(v)]}"
            for n, v in zip(names, self.export_versions, strict=True)
            if v != "\0"
        }
        return frozenset(found) | self.hidden_versioned

    @property
    def exports_unversioned(self) -> frozenset[str] | None:
        """The exported names without a version; None when that is all of them."""
        if self.export_versions.count("\0") == len(self.export_versions):
            return None
        names = self.export_names.split("\0")
        return frozenset(n for n, v in zip(names, self.export_versions, strict=True) if v == "\0")

    @cached_property
    def _versions(self) -> Mapping[str, str] | ExportIndex:
        """What :meth:`defines` asks for the versions a name is exported with (the characters
        of :attr:`export_versions`): a dict, or for a long list of names an
        :class:`ExportIndex` of it (a fifteenth of the memory)."""
        if len(self.export_names) >= INDEX_ABOVE:
            return ExportIndex(self.export_names, self.export_versions)
        found: dict[str, str] = {}
        if self.export_versions:
            for name, version in zip(
                self.export_names.split("\0"), self.export_versions, strict=True
            ):
                found[name] = found.get(name, "") + version
        return found

    @property
    def export_count(self) -> int:
        return self.export_names.count("\0") + 1 if self.export_names else 0

    def exported_like(self, pattern: re.Pattern[str]) -> list[str]:
        """Exported names matched by ``pattern``, which starts with the separator NUL and
        matches within one name (the first is searched for apart: no copy of all the names)."""
        names = self.export_names
        end = names.find("\0")
        first = names if end < 0 else names[:end]
        found = [m.group(1) for m in pattern.finditer("\0" + first)]
        return found + [m.group(1) for m in pattern.finditer(names, len(first))]

    def exported_starting(self, prefixes: tuple[str, ...]) -> list[str]:
        """Exported names that start with one of ``prefixes``, none of which starts another
        (as :meth:`exported_like` with ``\\0(prefix[^\\0]*)`` finds them, by str.find)."""
        names = self.export_names
        found: list[str] = []
        for prefix in prefixes:
            at = 0 if names.startswith(prefix) else names.find("\0" + prefix)
            while at >= 0:
                start = at + 1 if names[at] == "\0" else at
                end = names.find("\0", start)
                found.append(names[start:] if end < 0 else names[start:end])
                at = -1 if end < 0 else names.find("\0" + prefix, end)
        return found

    @property
    def platform(self) -> tuple[bool, int, bool, int]:
        """Loader compatibility key: auditwheel treats ELFOSABI_NONE/SYSV and GNU/LINUX alike."""
        return (self.osabi in (0, 3), self.elf_class, self.little_endian, self.machine)

    def is_compatible(self, other: ElfInfo) -> bool:
        same_abi = self.osabi == other.osabi or (self.osabi in (0, 3) and other.osabi in (0, 3))
        return same_abi and self.platform[1:] == other.platform[1:]

    def defines(self, name: str, version: str) -> bool:
        """Would the loader bind a reference ``name`` (needing ``version``, or none) here?"""
        later: tuple[Lookup, object] | None = self.__dict__.get(_LATER)
        if later is not None and "export_names" not in self.__dict__:
            hashed = later[0].defines(name, version)
            if hashed is not None:
                return hashed
        found = self._versions.get(name, "")
        if not version or not self.has_versym:
            return bool(found)
        if "\0" in found or f"{name}@{version}" in self.hidden_versioned:
            return True  # (a definition without a version binds a versioned reference)
        return any(self.def_versions[ord(v)] == version for v in found)

    def split_path(self, which: str) -> tuple[str, ...]:
        value = self.runpath if which == "runpath" else self.rpath
        return tuple(value.split(":")) if value is not None else ()


FIELD_NAMES = tuple(f.name for f in fields(ElfInfo))


class ExportIndex:
    """The versions each name of a NUL-separated list is exported with, without an object per
    name: the names' hashes, sorted, and where each name starts in the list; a hash found is
    checked against the name there, so the answer is exact. For TensorFlow 2.21's
    ``libtensorflow_cc.so.2`` (435,000 names, 80 MB) 10 MB, where a dict of them takes 130 MB."""

    def __init__(self, names: str, versions: str) -> None:
        hashes, starts = array("q"), array("q")
        pos, end, find = 0, 0, names.find
        while end < len(names):
            end = find("\0", pos)
            end = len(names) if end < 0 else end
            hashes.append(hash(names[pos:end]))
            starts.append(pos)
            pos = end + 1
        order = sorted(range(len(hashes)), key=hashes.__getitem__)
        self.hashes = array("q", [hashes[i] for i in order])
        self.order = array("q", order)
        self.starts, self.names, self.versions = starts, names, versions

        self._first = bisect_left

    def get(self, name: str, default: str = "") -> str:
        """The version characters of ``name``'s entries; ``default`` when it has none."""
        if "\0" in name:
            return default
        key, found = hash(name), ""
        i = self._first(self.hashes, key)
        while i < len(self.hashes) and self.hashes[i] == key:
            k = self.order[i]
            start, end = self.starts[k], self.starts[k] + len(name)
            if self.names.startswith(name, start) and self.names[end : end + 1] in ("", "\0"):
                found += self.versions[k]
            i += 1
        return found or default


def _is_strings(value: object) -> bool:
    return isinstance(value, (frozenset, tuple)) and all(type(v) is str for v in value)


def _unpack_info(values: tuple[tuple[object, bool | None, int], ...]) -> ElfInfo:
    fields: list[object] = []
    for value, as_set, count in values:
        if as_set is None:
            fields.append(value)
        else:
            items = str(value).split("\0") if count else []
            fields.append(frozenset(items) if as_set else tuple(items))
    build: Callable[..., ElfInfo] = ElfInfo
    return build(*fields)
