"""Libraries on this host, found by name and read once each (the search directories come from
:func:`wheels.policy.host_library_dirs`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from wheels.elf.decode import read_elf_file
from wheels.elf.info import ElfInfo
from wheels.elf.reader import ElfError

if TYPE_CHECKING:
    from collections.abc import Sequence


class HostLibraries:
    """Find and read libraries on this host by name; each path is looked at once.

    With :attr:`symbols_later` set, a library read from then on keeps its definitions undecoded
    until they are read, and looks them up in its hash table meanwhile (:mod:`wheels.elf.lookup`):
    for an audit that looks up few of them."""

    def __init__(self, dirs: Sequence[str], symbols_later: bool = False) -> None:
        self.dirs = tuple(dirs)
        self.symbols_later = symbols_later
        self._by_path: dict[str, tuple[str, ElfInfo] | None] = {}
        self._found: dict[tuple[object, ...], tuple[str, ElfInfo] | None] = {}

    def find(
        self, soname: str, like: ElfInfo, extra_dirs: Sequence[str] = ()
    ) -> tuple[str, ElfInfo] | None:
        """First ``soname`` in ``extra_dirs`` then the host dirs that suits ``like``'s platform."""
        key = (soname, like.platform, *extra_dirs)
        if key not in self._found:
            self._found[key] = self._search(soname, like, extra_dirs)
        return self._found[key]

    def _search(
        self, soname: str, like: ElfInfo, extra_dirs: Sequence[str]
    ) -> tuple[str, ElfInfo] | None:
        if "/" in soname:
            return None
        for d in (*extra_dirs, *self.dirs):
            hit = self.locate(f"{d.rstrip('/')}/{soname}")
            if hit is not None and like.is_compatible(hit[1]):
                return hit
        return None

    def prefetch(self, sonames: Sequence[str]) -> None:
        """Read the first file of each name in the search directories, ahead of need."""
        for soname in sonames:
            next((h for d in self.dirs if (h := self.locate(f"{d.rstrip('/')}/{soname}"))), None)

    def read(self, path: str) -> ElfInfo | None:
        hit = self.locate(path)
        return hit[1] if hit is not None else None

    def locate(self, path: str) -> tuple[str, ElfInfo] | None:
        """(real path, ELF data) of the ELF file at ``path``; None if there is none."""
        if path not in self._by_path:
            real = os.path.realpath(path)
            info = _try_read(real, self.symbols_later)
            self._by_path[path] = (real, info) if info is not None else None
        return self._by_path[path]


def _try_read(path: str, symbols_later: bool) -> ElfInfo | None:
    if not os.path.isfile(path):
        return None
    try:
        return read_elf_file(path, symbols_later)
    except ElfError:
        return None
