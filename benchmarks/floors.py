"""Decompression floors of a wheel: its ELF members inflated once each, serially, nothing else.

- :func:`old_floor`: zlib, one call per member (what the audit was measured against before);
- :func:`new_floor`: as the audit now inflates (wheels/inflate.py): one call into the
  stated size with libdeflate below 64 MB, a copyable stream (zlib-ng) above;
- :func:`floor_table`: each library installed, one call and streamed, for the choice the
  audit's inflate module made (and records in its docstring);
- :func:`verified_floor`: every member of the wheel (not only its ELF files) inflated as the
  audit inflates and hashed with sha256, what verifying its RECORD takes at the least; with
  the cores and an interpreter's start-up, the least wall time of any such audit
  (:meth:`Verified.bound`).
"""

from __future__ import annotations

import hashlib
import importlib
import statistics
import time
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheels.inflate import ONE_CALL_BELOW, inflate_one_call, new_stream

STEP = 256 << 10  # compressed bytes per streamed call (the audit's is wheels.audit.members')
Raw = tuple[zipfile.ZipInfo, bytes]


def elf_raws(wheel: Path, members: Sequence[str]) -> list[Raw]:
    """The raw deflate bytes of each named member, read from its local header on."""
    out = []
    with zipfile.ZipFile(wheel) as zf, wheel.open("rb") as fh:
        for info in (zf.getinfo(m) for m in members):
            fh.seek(info.header_offset)
            head = fh.read(30)
            skip = (
                30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
            )
            fh.seek(info.header_offset + skip)
            out.append((info, fh.read(info.compress_size)))
    return out


def _deflated(raws: Sequence[Raw]) -> list[Raw]:
    return [(i, r) for i, r in raws if i.compress_type == zipfile.ZIP_DEFLATED]


def old_floor(raws: Sequence[Raw]) -> float:
    start = time.perf_counter()
    for info, raw in _deflated(raws):
        zlib.decompress(raw, -15, info.file_size)
    return time.perf_counter() - start


def new_floor(raws: Sequence[Raw]) -> float:
    start = time.perf_counter()
    for info, raw in _deflated(raws):
        if info.file_size < ONE_CALL_BELOW and inflate_one_call(raw, info.file_size) is not None:
            continue
        inflater = new_stream()
        view = memoryview(raw)
        for at in range(0, len(raw), STEP):
            inflater.decompress(view[at : at + STEP])
        inflater.flush()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Verified:
    """What verifying a wheel's RECORD takes at the least, one thread (:func:`verified_floor`)."""

    total: float  # every file member inflated and hashed with sha256, serially
    largest: float  # the largest member inflated: one deflate stream, which only one core inflates

    def bound(self, cores: int, start: float) -> float:
        """The least wall time of any audit that checks RECORD, in a process that takes ``start``
        seconds to run nothing: every member inflated and hashed, spread perfectly over
        ``cores``, and no sooner than one core inflates the largest (its hash may run beside)."""
        return start + max(self.largest, self.total / cores)


def verified_floor(wheel: Path) -> Verified:
    """Seconds to inflate every file member of ``wheel`` once and hash it with sha256, serially,
    in one thread, its raw bytes already read (the least any audit that checks RECORD does);
    and of those, the largest member's inflate."""
    with zipfile.ZipFile(wheel) as zf:
        names = [i.filename for i in zf.infolist() if not i.filename.endswith("/")]
    raws = sorted(elf_raws(wheel, names), key=lambda r: r[0].file_size, reverse=True)
    start = time.perf_counter()
    largest = 0.0
    for k, (info, raw) in enumerate(raws):
        data: object = raw
        if info.compress_type == zipfile.ZIP_DEFLATED:
            data = inflate_one_call(raw, info.file_size)
            if data is None or info.file_size >= ONE_CALL_BELOW:
                data = zlib.decompress(raw, -15, max(1, info.file_size))
        if k == 0:
            largest = time.perf_counter() - start
        hashlib.sha256(data).digest()  # type: ignore[arg-type]
    return Verified(time.perf_counter() - start, largest)


def _one_call(module: str) -> Callable[[bytes, int], object] | None:
    try:
        if module == "deflate":
            one_call: Callable[[bytes, int], object] = importlib.import_module(
                "deflate"
            ).deflate_decompress
            return one_call
        lib = importlib.import_module(module)
    except ImportError:
        return None
    return lambda raw, size: lib.decompress(raw, -15, size)


def _stream(module: str) -> Callable[[bytes, int], object] | None:
    try:
        lib = importlib.import_module(module)
    except ImportError:
        return None

    def inflate(raw: bytes, _size: int) -> object:
        inflater = lib.decompressobj(-15)
        view = memoryview(raw)
        for at in range(0, len(raw), STEP):
            inflater.decompress(view[at : at + STEP])
        return inflater.flush()

    return inflate


LIBRARIES = {
    "libdeflate (deflate)": ("deflate", None),
    "ISA-L (isal)": ("isal.isal_zlib", "isal.isal_zlib"),
    "zlib-ng (zlib-ng)": ("zlib_ng.zlib_ng", "zlib_ng.zlib_ng"),
    "zlib": ("zlib", "zlib"),
}


def _cell(
    how: str, make: Callable[[bytes, int], object] | None, raws: Sequence[Raw], runs: int
) -> str:
    if make is None:
        return f"{how}  (not installed)          "
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for info, raw in raws:
            make(raw, info.file_size)
        times.append(time.perf_counter() - start)
    return f"{how} {min(times):5.2f} s (median {statistics.median(times):.2f})"


def floor_table(raws: Sequence[Raw], runs: int = 3) -> list[str]:
    """Each installed library on the ELF members, one call and streamed (best of ``runs``)."""
    deflated = _deflated(raws)
    size = sum(i.file_size for i, _ in deflated) / 1e6
    lines = [
        f"inflating the {len(deflated)} ELF members ({size:.0f} MB), one thread, best of {runs}:"
    ]
    for label, (one_call, stream) in LIBRARIES.items():
        makers = {"one call": _one_call(one_call), "streamed": _stream(stream) if stream else None}
        cells = [_cell(how, make, deflated, runs) for how, make in makers.items()]
        lines.append(f"  {label:22s} " + "   ".join(cells))
    return lines
