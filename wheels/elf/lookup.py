"""A definition looked up in an ELF file's own hash table, as the dynamic loader looks it up.

The audit binds each undefined symbol of a wheel's ELF files to the libraries loaded with them,
this host's among them. Decoding every definition of a host library costs more than a small
wheel's whole audit asks of it: this host's libc defines 2,496 symbols (3.3 ms to decode),
libstdc++ 5,954 (6.5 ms), where a small extension module looks up a dozen names. So a host
library read for a wheel with few undefined symbols (:class:`wheels.elf.HostLibraries`) keeps
its definitions undecoded, and :meth:`HashedSymbols.defines` finds a name through the file's
``.gnu.hash`` (else ``.hash``) table: the few entries of that name, as the loader finds them.
Past :data:`LOOKUPS` lookups, or when anything reads its symbol fields, the library is decoded
whole after all (:meth:`wheels.elf.ElfInfo.__getattr__`): the answers are the same either way
(tests/unit/test_elf_lookup.py holds them equal on this host's libraries).
"""

from __future__ import annotations

import struct

from wheels.elf.reader import ElfError, Image, Section, unsigned_words
from wheels.elf.symbols import VERSYM_HIDDEN, exported, read_versym
from wheels.elf.versions import Versions

SHT_HASH, SHT_GNU_HASH = 5, 0x6FFFFFF6
# Lookups in one library before its definitions are decoded (a set is faster past it). As many
# as a wheel may leave undefined and still look host libraries up (wheels.audit.core:
# FEW_UNDEFINED): the checks of pyzmq 26.2 took 17.1 ms with 256 (libc decoded), 8.8 ms with
# this; lightgbm 4.5 16.4 against 9.9, shapely 2.0.6 21.8 against 14.2 (medians of 9, in process).
LOOKUPS = 1024


def gnu_hash(name: bytes) -> int:
    """The DT_GNU_HASH hash of a symbol name (Bernstein's, h * 33 + c)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def sysv_hash(name: bytes) -> int:
    """The DT_HASH hash of a symbol name (the System V ABI's ``elf_hash``)."""
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


class HashedSymbols:
    """The dynamic symbols of one ELF file, found by name through its hash table."""

    def __init__(
        self,
        image: Image,
        dynsym: Section,
        table: str,
        versions: Versions,
        hashes: Section,
    ) -> None:
        r = image.reader
        self.table, self.versions = table, versions
        self.entry = r.layout.fmt("IIIBBH", "IBBHQQ")
        self.count = dynsym.size // self.entry.size
        self.symbols = r.span(dynsym.offset, self.count * self.entry.size, "dynamic symbol table")
        self.versym = read_versym(r, image.sections, self.count)
        self.word = struct.Struct(r.layout.end + "I")
        self.little = r.little
        self.words = r.span(hashes.offset, hashes.size, "symbol hash table")
        self.gnu = hashes.sh_type == SHT_GNU_HASH
        self.lookups = 0
        if self.gnu:
            nbuckets, self.symoffset, bloom_size, _ = struct.unpack_from(
                r.layout.end + "4I", self.words
            )
            self.buckets_at = 16 + bloom_size * (8 if r.cls == 64 else 4)
        else:
            nbuckets, _ = struct.unpack_from(r.layout.end + "2I", self.words)
            self.buckets_at = 8
        if nbuckets == 0:
            raise ElfError("a symbol hash table with no buckets")
        self.nbuckets = nbuckets

    @classmethod
    def of(
        cls, image: Image, dynsym: Section | None, table: str | None, versions: Versions
    ) -> HashedSymbols | None:
        """The lookup for ``image``'s ``dynsym``; None when it has no hash table for it, or
        anything about its symbols that decoding them would refuse (a name past the string
        table): then it is decoded at once, as any other file, and fails as that does."""
        if dynsym is None or table is None:
            return None
        index = next((i for i, s in enumerate(image.sections) if s is dynsym), -1)
        linked = [s for s in image.sections if s.link == index and s.size >= 16]
        hashes = next((s for s in linked if s.sh_type == SHT_GNU_HASH), None)
        hashes = hashes or next((s for s in linked if s.sh_type == SHT_HASH), None)
        if hashes is None:
            return None
        try:
            found = cls(image, dynsym, table, versions, hashes)
        except (ElfError, struct.error, ValueError, IndexError):
            return None
        return found if found.names_fit() else None

    def names_fit(self) -> bool:
        """Does every symbol's name start inside the string table (as decoding checks)?"""
        words = unsigned_words(bytes(self.symbols), "I", self.little)
        names = words[0 :: self.entry.size // 4]
        return not names or max(names) < len(self.table)

    def defines(self, name: str, version: str) -> bool | None:
        """What :meth:`wheels.elf.ElfInfo.defines` answers for this file, from the entries named
        ``name``; None past :data:`LOOKUPS` lookups (decode it instead)."""
        self.lookups += 1
        if self.lookups > LOOKUPS:
            return None
        try:
            seen = self._versions_of(name)
        except (ElfError, struct.error, IndexError, UnicodeEncodeError):
            return None  # (a chain that leads astray: the decoded definitions answer)
        if not version or self.versym is None:
            return any(not v & VERSYM_HIDDEN for v in seen)
        names = self.versions.def_by_index
        if any((v & 0x7FFF) >= 2 and names.get(v & 0x7FFF) == version for v in seen):
            return True
        return any(not v & VERSYM_HIDDEN and not _versioned(v & 0x7FFF, names) for v in seen)

    def _versions_of(self, name: str) -> list[int]:
        """The version words of the definitions called ``name`` that an ELF exports (global or
        weak, neither section nor file, default or protected visibility)."""
        out = []
        for index in self._named(name):
            _, info, other, shndx, _, _ = self._row(index)
            if exported(info, other, shndx):
                out.append(self.versym[index] if self.versym is not None else 0)
        return out

    def _row(self, index: int) -> tuple[int, ...]:
        if not 0 <= index < self.count:
            raise ElfError(f"a hash chain names symbol {index} of {self.count}")
        row: tuple[int, ...] = self.entry.unpack_from(self.symbols, index * self.entry.size)
        if self.entry.size == 16:  # ELF32 (name, value, size, info, other, shndx)
            n, v, z, i, o, x = row
            row = (n, i, o, x, v, z)
        return row

    def _named(self, name: str) -> list[int]:
        """The symbol indices the hash table chains under ``name`` whose name it is."""
        raw = name.encode("latin-1")
        word, words = self.word, self.words
        out: list[int] = []
        if self.gnu:
            h = gnu_hash(raw)
            index = word.unpack_from(words, self.buckets_at + 4 * (h % self.nbuckets))[0]
            if index == 0:
                return out
            chain = self.buckets_at + 4 * self.nbuckets
            for _ in range(self.count):  # (a chain ends at its entry with the low bit set)
                if index < self.symoffset:
                    raise ElfError(f"a hash chain names symbol {index}, below its first")
                link = word.unpack_from(words, chain + 4 * (index - self.symoffset))[0]
                if link | 1 == h | 1 and self._is(index, name):
                    out.append(index)
                if link & 1:
                    break
                index += 1
            return out
        h = sysv_hash(raw)
        index = word.unpack_from(words, self.buckets_at + 4 * (h % self.nbuckets))[0]
        chain = self.buckets_at + 4 * self.nbuckets
        for _ in range(self.count):
            if index == 0:
                break
            if self._is(index, name):
                out.append(index)
            index = word.unpack_from(words, chain + 4 * index)[0]
        return out

    def _is(self, index: int, name: str) -> bool:
        offset = self._row(index)[0]
        end = offset + len(name)
        table = self.table
        return end < len(table) and table[end] == "\0" and table.startswith(name, offset)


def _versioned(index: int, names: dict[int, str]) -> bool:
    """Does this version index name a version the file defines (the loader's ``name@VER``)?"""
    return index >= 2 and index in names
