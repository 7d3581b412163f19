"""A big member kept only where the audit reads it, as it streams past the inflater.

Keeping a big library inflated costs the fresh pages of its whole content, and on a virtual
machine those are dear: 434 MB of them took 0.15-0.57 s here, more than inflating its last
third. Yet the ELF reader reads a few ranges of it: for torch's ``libtorch_cpu.so`` 7.1 MB
in five spans (the first 7 MB with the headers, dynamic symbols, strings and versions; the
dynamic segment; the notes just past the last loadable segment; the section names and headers
at the end). The fat binary reader reads only headers, which :mod:`wheels.cuda.tap` picks out
as they stream past. So a member of :data:`SPARSE_ABOVE` bytes or more is kept in the ranges
:func:`wanted` names, decided from its program headers as soon as they have streamed past.

A read outside them inflates the member again, whole, into an unnamed temporary file
(:class:`Spooled`), never into memory: the answer is the same, only slower. That happens when
the dynamic string table runs past the first :data:`PREFIX` bytes, as TensorFlow 2.21's
``libtensorflow_cc.so.2`` does (82 MB of names from offset 15 MB): kept in memory instead, its
751 MB had made the audit's peak RSS 1.43 GB.
"""

from __future__ import annotations

import os
import tempfile
from bisect import bisect_right
from typing import TYPE_CHECKING

from wheels.elf import ElfError
from wheels.elf.reader import HEAD, PT_LOAD, head_layout

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import BinaryIO

    from wheels.cuda.fatbin import Seen
    from wheels.elf import ByteSource

SPARSE_ABOVE = 64 << 20  # members this big (inflated) may be kept only where they are read
PREFIX = 16 << 20  # the first bytes: headers, dynamic symbols and their strings, versions
SMALL_SEGMENT = 16 << 20  # segments this small are kept whole (the dynamic, the notes, the data
# segment, a segment patchelf added at the end with the moved dynamic strings)
AFTER_SEGMENT = 64 << 10  # kept past the end of each loadable segment: the notes and .comment
# that follow the last one
TAIL_WHOLE = 32 << 20  # what follows the last segment is kept whole when no bigger than this
# (symbols, section names, section headers), else its start and BEFORE_SECTIONS
BEFORE_SECTIONS = 1 << 20  # kept before the section header table: the section names

Span = tuple[int, int]


def wanted(head: bytes, size: int, final: bool) -> list[Span] | None:
    """The ranges of a ``size``-byte file to keep, from its first bytes; None while they are
    too few to tell (unless ``final``). A file that is not ELF keeps its first bytes alone."""
    try:
        layout = head_layout(head, final)
    except ElfError:
        return [(0, min(size, HEAD))]
    if layout is None:
        return None
    header, segments = layout
    spans = [(0, PREFIX)]
    spans += [(s.offset, s.offset + s.filesz) for s in segments if s.filesz <= SMALL_SEGMENT]
    ends = [s.offset + s.filesz for s in segments if s.p_type == PT_LOAD]
    spans += [(end, end + AFTER_SEGMENT) for end in ends]
    shoff = header.shoff or size
    last = max([e for e in ends if e <= shoff], default=shoff)
    if shoff - last <= TAIL_WHOLE:
        spans.append((last, size))
    else:
        spans.append((shoff - BEFORE_SECTIONS, size))
    return _merged(spans, size)


def _merged(spans: list[Span], size: int) -> list[Span]:
    out: list[list[int]] = []
    for lo, hi in sorted((max(0, a), min(b, size)) for a, b in spans):
        if lo >= hi:
            continue
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


class Keeper:
    """Fed the parts of one file in order; keeps the bytes of the ranges :func:`wanted` names."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.spans: list[tuple[int, bytearray]] = []
        self._wanted: list[Span] | None = None
        self._held = b""
        self._pos = 0

    def feed(self, part: bytes) -> None:
        if self._wanted is None:  # held back until the program headers say what to keep
            self._held += part
            self._wanted = wanted(self._held, self.size, final=len(self._held) >= HEAD)
            if self._wanted is None:
                return
            part, self._held = self._held, b""
        start, end = self._pos, self._pos + len(part)
        self._pos = end
        for lo, hi in self._wanted:
            a, b = max(lo, start), min(hi, end)
            if a < b:
                self._keep(a, memoryview(part)[a - start : b - start])

    def _keep(self, offset: int, data: memoryview) -> None:
        if self.spans and self.spans[-1][0] + len(self.spans[-1][1]) == offset:
            self.spans[-1][1].extend(data)
        else:
            self.spans.append((offset, bytearray(data)))

    def source(self, again: Callable[[], ByteSource], seen: Seen) -> Sparse:
        """What was kept, once the whole file has streamed past."""
        if self._held:  # (a file shorter than its head: all of it)
            self.spans, self._held = [(0, bytearray(self._held))], b""
        return Sparse(self._pos, self.spans, again, seen)


class Sparse:
    """The bytes of a file that were kept (:class:`Keeper`); a range outside them is read from
    the whole file, inflated again by ``again`` on the first such read.

    ``fatbin_seen``: the fat binary headers seen as the file streamed past (see
    :mod:`wheels.cuda.tap`), for :func:`wheels.cuda.devicecode.scan`.
    """

    def __init__(
        self,
        size: int,
        spans: list[tuple[int, bytearray]],
        again: Callable[[], ByteSource],
        seen: Seen | None,
    ) -> None:
        self.size = size
        self.spans = spans
        self.starts = [start for start, _ in spans]
        self.fatbin_seen = seen
        self.misses = 0
        self._again = again
        self._whole: ByteSource | None = None

        self._after = bisect_right

    def range(self, offset: int, size: int) -> memoryview:
        if size <= 0:
            return memoryview(b"")
        if self._whole is None:
            i = self._after(self.starts, offset) - 1
            if i >= 0:
                start, data = self.spans[i]
                if offset + size <= start + len(data):
                    return memoryview(data)[offset - start : offset - start + size]
            self.misses += 1
            self._whole = self._again()
            self.spans, self.starts = [], []  # (the whole file answers from now on)
        return self._whole.range(offset, size)

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))

    def close(self) -> None:
        """Gives back the temporary file of a read outside what was kept."""
        if isinstance(self._whole, Spooled):
            self._whole.close()


class Spooled:
    """A file's bytes written once to an unnamed temporary file and read back range by range:
    the whole of a big member for the reads :class:`Sparse` did not keep, in the page cache
    rather than in this process's memory. The file goes when this object does."""

    def __init__(self, parts: Iterable[bytes | bytearray]) -> None:
        # Open past this call, closed by close() (or with this object).
        self._file: BinaryIO = tempfile.TemporaryFile(prefix="infini-stack-audit-")  # noqa: SIM115
        try:
            for part in parts:
                self._file.write(part)
            self._file.flush()
        except BaseException:
            self._file.close()
            raise
        self.size = self._file.tell()

    def range(self, offset: int, size: int) -> memoryview:
        if size <= 0:
            return memoryview(b"")
        return memoryview(os.pread(self._file.fileno(), min(size, self.size - offset), offset))

    def head(self, size: int) -> bytes:
        return bytes(self.range(0, min(size, self.size)))

    def close(self) -> None:
        self._file.close()
