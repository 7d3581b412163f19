"""Fat binary headers picked out of an ELF file's bytes as they stream past, once.

The audit does not keep a big member inflated (:mod:`wheels.audit.members`); reading its fat
binaries afterwards would inflate the whole ``.nv_fatbin`` section again, a few hundred
megabytes for a CUDA library. Instead the inflater feeds each part here: the read-only
loadable segments (where the linker puts ``.nv_fatbin``, beside ``.rodata``; the program headers
in the first bytes say where they are) are searched for the fat binary magic at 8-byte
boundaries, and from each hit the chain of its entry headers is followed as the bytes arrive,
each header kept (64 bytes). Which hits are the section's is decided later, when the section
headers (at the end of the file) are known: :func:`wheels.cuda.fatbin.read_fatbin_at` reads the
kept headers, and the source itself only for what was not kept (PTX whose version is in its
text, or a layout with ``.nv_fatbin`` in an executable segment, unless ``code_too``: most CUDA
libraries link everything but their data into one executable segment; searching it costs
libc's ``memmem`` 0.17 ms a megabyte, which a member kept only where it is read, see
:mod:`wheels.audit.sparse`, pays rather than inflating itself again).
"""

from __future__ import annotations

import ctypes
import heapq
import re
import struct
from functools import cache
from typing import TYPE_CHECKING

from wheels.cuda.fatbin import FATBIN_MAGIC, FATBIN_VERSION, Seen, first_nonzero
from wheels.elf import ElfError
from wheels.elf.reader import HEAD, PT_LOAD, head_layout

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

_NEEDLE = struct.pack("<IH", FATBIN_MAGIC, FATBIN_VERSION)
_MAGIC = re.compile(re.escape(_NEEDLE))
_HEADER = struct.Struct("<IHHQ")  # as wheels.cuda.fatbin reads them
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, padded payload size
ENTRY_SIZE = 64
_TAIL = ENTRY_SIZE
_PF_X, _PF_W = 1, 2


class FatbinTap:
    """Fed the parts of one file in order; ``seen`` holds the headers seen, by offset, and for
    the end of each fat binary where the next byte that is not zero lies."""

    def __init__(self, code_too: bool = False) -> None:
        self.code_too = code_too
        self.windows: dict[int, bytes] = {}
        self.nonzero: dict[int, int] = {}
        self.seen = Seen(self.windows, self.nonzero)
        self._zeros: list[int] = []  # ends of fat binaries whose next nonzero byte is wanted
        self._pos = 0
        self._tail = b""
        self._ranges: list[tuple[int, int]] | None = None  # where to look, once known
        self._held = b""
        self._pending: list[tuple[int, int, int]] = []  # (offset, size, end of its fat binary)
        self._seen: set[int] = set()
        self._covered = 0  # the fat binaries found reach here: no magic to look for before it

    def feed(self, part: bytes) -> None:
        if self._ranges is None:  # held back until the program headers say where to look
            self._held += part
            self._ranges = _searched(self._held, len(self._held) >= HEAD, self.code_too)
            if self._ranges is None:
                return
            part, self._held = self._held, b""
        start, end = self._pos, self._pos + len(part)
        if self._ranges:
            self._find(part, start)
        self._pos = end
        while self._pending and self._pending[0][0] + self._pending[0][1] <= end:
            offset, size, fat_end = heapq.heappop(self._pending)
            data = self._take(offset, size, part, start)
            if data is not None:
                self._handle(offset, data, fat_end)
        self._past_zeros(part, start)
        self._tail = (self._tail + part)[-_TAIL:] if len(part) < _TAIL else part[-_TAIL:]

    def _find(self, part: bytes, start: int) -> None:
        edge = self._tail[-5:]
        data = edge + part[:5]
        hit = data.find(_NEEDLE)  # a magic across the edge of two parts
        while hit >= 0:
            self._schedule(start - len(edge) + hit, _HEADER.size, 0)
            hit = data.find(_NEEDLE, hit + len(_NEEDLE))
        for lo, hi in self._ranges or ():
            a = max(lo, start, self._covered) - start
            b = min(hi, start + len(part)) - start
            if a < b:
                for at in _hits(part, a, b):
                    self._schedule(start + at, _HEADER.size, 0)

    def _schedule(self, offset: int, size: int, fat_end: int) -> None:
        if offset % 8 == 0 and offset not in self._seen:
            self._seen.add(offset)
            heapq.heappush(self._pending, (offset, size, fat_end))

    def _take(self, offset: int, size: int, part: bytes, start: int) -> bytes | None:
        if offset >= start:
            return part[offset - start : offset - start + size]
        back = start - offset
        if back > len(self._tail):
            return None  # from before what was kept: the reader reads it from the source
        return (self._tail[-back:] + part)[:size]

    def _handle(self, offset: int, data: bytes, fat_end: int) -> None:
        self.windows[offset] = data
        if fat_end == 0:  # a fat binary header, or where one may follow the last
            magic, version, header_size, size = _HEADER.unpack(data)
            if (magic, version) != (FATBIN_MAGIC, FATBIN_VERSION) or header_size < _HEADER.size:
                return
            end = offset + header_size + size
            self._zeros.append(end)
            if size:
                self._schedule(offset + header_size, ENTRY_SIZE, end)
            if header_size == _HEADER.size:  # as nvcc writes them: the next one is at its end
                self._covered = max(self._covered, end)
                self._schedule(end, _HEADER.size, 0)
            return
        _, _, header_size, padded = _ENTRY.unpack_from(data)
        following = offset + header_size + padded
        if header_size >= ENTRY_SIZE and following < fat_end:
            self._schedule(following, ENTRY_SIZE, fat_end)

    def _past_zeros(self, part: bytes, start: int) -> None:
        """Where the zeros after each fat binary end, as far as this part shows."""
        waiting = []
        for fat_end in self._zeros:
            if fat_end >= start + len(part):
                waiting.append(fat_end)
            elif (found := first_nonzero(part, max(fat_end - start, 0))) >= 0:
                self.nonzero[fat_end] = start + found
            else:
                waiting.append(fat_end)
        self._zeros = waiting


def _hits(part: bytes, a: int, b: int) -> Iterator[int]:
    """Where the magic starts in ``part[a:b]``: by libc's memmem through ctypes, which lets go
    of the GIL (a hash thread runs beside it), else by a regular expression. Over torch's
    414 MB ``libtorch_cpu.so``: memmem 0.07 s, re 0.13-0.16 s, bytes.find 0.25 s."""
    find = _memmem() if type(part) is bytes else None
    if find is None:
        yield from (m.start() for m in _MAGIC.finditer(part, a, b))
        return

    base = ctypes.cast(ctypes.c_char_p(part), ctypes.c_void_p).value or 0
    while a < b:
        found = find(base + a, b - a, _NEEDLE, len(_NEEDLE))
        if not found:
            return
        yield found - base
        a = found - base + 1


@cache
def _memmem() -> Callable[[int, int, bytes, int], int | None] | None:
    try:
        find = ctypes.CDLL(None).memmem
    except (OSError, AttributeError):
        return None
    find.restype = ctypes.c_void_p
    find.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return find


def _searched(head: bytes, final: bool, code_too: bool) -> list[tuple[int, int]] | None:
    """The file ranges of the loadable segments that are not writable (nor executable, unless
    ``code_too``), from the file's first bytes; None while they are too few to tell (unless
    ``final``), none when they are not those of an ELF file (then nothing is searched)."""
    try:
        layout = head_layout(head, final)
    except ElfError:
        return []
    if layout is None:
        return None
    _, segments = layout
    return [
        (s.offset, s.offset + s.filesz)
        for s in segments
        if s.p_type == PT_LOAD and not s.flags & (_PF_W if code_too else _PF_X | _PF_W)
    ]
