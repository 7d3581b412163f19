"""The inflaters: the fastest library installed for each way a member is inflated, zlib when
none is (they are dependencies of the install wherever their wheels exist).

Picked by measurement (``benchmarks/audit_vs_auditwheel.py`` prints these figures; torch 2.13.0
CPU wheel, Python 3.11, two shared cores, best of three):

- in one call, which needs the size the zip directory states (all members below
  :data:`ONE_CALL_BELOW`): libdeflate (``deflate``) 0.18 s for the 12,241 members of up to
  1 MB compressed (191 MB), ISA-L (``isal``) 0.25 s, zlib-ng (``zlib-ng``) 0.26 s, zlib 0.44 s;
  for the six members of 1 to 64 MB (74 MB): libdeflate 0.068 s, ISA-L 0.095 s, zlib streamed
  0.20 s;
- streamed (members too big to keep inflated, over a gigabyte, which the audit re-inflates in
  parts from saved states, so the inflater must copy its state): the 434 MB ``libtorch_cpu.so``
  in 256 KB steps, ISA-L 0.46 s (but its inflater cannot be copied), zlib-ng 0.53 s,
  libdeflate in one call 0.53 s (and then no hashing beside it), zlib 0.88 s.
- kept whole or streamed and re-inflated in parts, for a member with a big fat binary (whose
  walk touches every part): NCCL's 239 MB ``libnccl.so.2``, whole audit of its wheel in this
  process, zlib-ng streamed from saved states 1.55 s, libdeflate in one call 0.98 s (the call
  0.69 s, of which 0.13 s are the fresh pages of its output; sha256 0.14 s).

- streamed and kept only where the audit reads it (:mod:`wheels.audit.sparse`), every deflated
  member of 64 MB or more (to a gigabyte), hashed (and its fat binary headers and kept ranges
  taken) on a second thread as it goes, and read ahead on a third, when the other
  core would idle (``pool.hashes_beside``): against
  libdeflate in one call and sha256 after, the 23 ELF members of 78-543 MB in the differential
  corpus (cuBLAS, cuDNN, NCCL, cuSPARSE, cuSOLVER, torch, llvmlite, polars), hashed beside,
  took 10.3 s against 14.2 s in this process, every scan the same and none read again. Kept
  whole instead, ISA-L with the hash beside only traded the hash for the fresh pages of its
  output (434 MB of them: 0.15-0.57 s on this VM) and a slower inflate than libdeflate's: the
  CLI on cuBLAS 13.1 took 1.29 s against 1.23 s. zlib-ng streams slower than ISA-L (cuDNN's
  543 MB library: 1.93 s against 1.51 s, unkept).

So: libdeflate for one call up to a gigabyte, ISA-L for streams whose state is never copied,
zlib-ng for streams re-inflated from saved states, zlib for any of them when they are missing.
All of them release the GIL while they inflate. :envvar:`INFINI_STACK_INFLATE` = ``zlib`` uses
zlib alone (the benchmark's old floor; a test of the fallback).

Measured and left: huge pages for the output of a member inflated whole. libdeflate (through
its exported ``libdeflate_deflate_decompress``) into an anonymous map advised
``MADV_HUGEPAGE`` inflated torch's 414 MB ``libtorch_cpu.so`` in 0.518 s, into a plain map
0.517 s, and ``deflate_decompress`` into its own bytearray 0.521 s (medians of 5, one warm
process). Asked of glibc for every large allocation (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``),
the CLI on torch's CPU wheel took 0.965 s against 1.050 s (medians of 10, interleaved), but 4
of the 10 runs took 1.16-1.78 s, stalled while the kernel compacted memory for the pages;
none of the plain runs took more than 1.15 s. On another VM, where the kernel charged 0.175 s
of system time for the fresh pages of that member, a map made ``MAP_POPULATE`` took 0.561 s
against 0.624 s into the bytearray (medians of 5): 0.06 s on the child's path, which would need
libdeflate's own symbols through ctypes; ``MADV_HUGEPAGE`` took 0.856 s there (compaction).
glibc's heap kept rather than trimmed (``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_TOP_PAD_``
raised) left the CLI on torch's CPU wheel within noise: 149,000 page faults against 160,000,
1.49 s against 1.55 s; with ``MALLOC_MMAP_THRESHOLD_`` raised as well, 1.59 s (medians of 7,
interleaved).
"""

from __future__ import annotations

import os
import zlib
from functools import cache
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from collections.abc import Callable


class Inflater(Protocol):
    """A streaming raw-deflate inflater, as ``zlib.decompressobj(-15)`` makes them."""

    @property
    def eof(self) -> bool: ...

    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes | memoryview, max_length: int = 0, /) -> bytes: ...

    def flush(self) -> bytes: ...

    def copy(self) -> Inflater: ...


ONE_CALL_BELOW = 1 << 30  # members that inflate to less than this are inflated in one call
ENV = "INFINI_STACK_INFLATE"


class InflateError(Exception):
    """The library refused the data: corrupt, or not of the stated size."""


def _zlib_only() -> bool:
    return os.environ.get(ENV, "").strip().lower() == "zlib"


def _one_call_library() -> tuple[str, Callable[[bytes | memoryview, int], bytearray]] | None:
    if _zlib_only():
        return None
    try:
        import deflate
    except ImportError:
        return None

    def inflate(raw: bytes | memoryview, size: int) -> bytearray:
        try:
            return deflate.deflate_decompress(raw, size)
        except deflate.DeflateError as exc:
            raise InflateError(str(exc)) from None

    return "libdeflate", inflate


@cache
def _stream_library() -> tuple[str, Callable[[], Inflater], type[Exception]]:
    """zlib-ng where it is installed, else zlib."""
    if not _zlib_only():
        try:
            from zlib_ng import zlib_ng
        except ImportError:
            pass
        else:
            # (zlib-ng's stubs leave out Decompress.copy and type ``error`` as an instance)
            make = cast("Callable[[], Inflater]", lambda: zlib_ng.decompressobj(-15))
            return "zlib-ng", make, cast("type[Exception]", zlib_ng.error)

    return "zlib", lambda: zlib.decompressobj(-15), zlib.error


@cache
def _one_way_stream_library() -> tuple[str, Callable[[], Inflater], type[Exception]] | None:
    """ISA-L, for a stream whose state is never copied (kept whole, or only where it is read)."""
    if _zlib_only():
        return None
    try:
        from isal import isal_zlib
    except ImportError:
        return None
    make = cast("Callable[[], Inflater]", lambda: isal_zlib.decompressobj(-15))
    return "ISA-L", make, cast("type[Exception]", isal_zlib.error)


_ONE_CALL = _one_call_library()
ONE_CALL_NAME = _ONE_CALL[0] if _ONE_CALL else None


def new_stream(copyable: bool = True) -> Inflater:
    """A raw-deflate inflater; one that can copy its state unless ``copyable`` is false."""
    one_way = None if copyable else _one_way_stream_library()
    return (one_way or _stream_library())[1]()


def stream_errors() -> tuple[type[Exception], ...]:
    """What those inflaters raise on corrupt data."""
    one_way = _one_way_stream_library()
    return (_stream_library()[2],) + ((one_way[2],) if one_way else ())


def inflate_one_call(raw: bytes | memoryview, size: int) -> bytearray | None:
    """``raw`` inflated in one call into at most ``size`` bytes, by libdeflate; None when it is
    not installed. Raises :class:`InflateError` when the data is corrupt or inflates to more."""
    if _ONE_CALL is None:
        return None
    return _ONE_CALL[1](raw, size)


def crc32(data: bytes | bytearray | memoryview) -> int:
    """The CRC-32 a zip directory states: libdeflate's when it is installed, else zlib's."""
    if _ONE_CALL is not None:
        import deflate

        return deflate.crc32(data)

    return zlib.crc32(data)


def libraries() -> dict[str, str]:
    """Which library inflates how, for reports: ``{"one call": ..., "stream": ...,
    "one-way stream": ...}``."""
    one_way = _one_way_stream_library()
    return {
        "one call": ONE_CALL_NAME or "zlib",
        "stream": _stream_library()[0],
        "one-way stream": one_way[0] if one_way else _stream_library()[0],
    }
