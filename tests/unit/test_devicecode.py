"""Device code as the audit keeps it: read through a byte source a header at a time (the
reader agrees with the bytes-based one, wherever the source's parts are cut), or from the
headers picked out of the stream while it was inflated (then the source is not read at all),
merged into distinct images, stored in the cache and read back."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_fatbin import ELF, LINUX64, PTX, PTX_TEXT, VALID, ZSTD, entry, fatbin
from wheels.cuda import devicecode
from wheels.cuda.fatbin import FatbinError, Seen, read_fatbin, read_fatbin_at
from wheels.cuda.tap import FatbinTap
from wheels.elf import Chunks

PADDED = fatbin(entry(ELF, 80)) + b"\x00" * 5000 + VALID  # padding past one read window


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(1, len(PADDED) + 99), max_size=6), before=st.integers(0, 99))
def test_reading_through_a_byte_source_finds_what_reading_the_bytes_finds(
    cuts: list[int], before: int
) -> None:
    data = b"\x11" * before + PADDED + b"\x22" * 99
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    source = Chunks([data[a:b] for a, b in itertools.pairwise(edges)])
    assert read_fatbin_at(source, before, len(PADDED), ".nv_fatbin") == read_fatbin(PADDED)


def test_a_section_outside_the_source_or_cut_short_is_a_fatbin_error() -> None:
    source = Chunks([VALID])
    with pytest.raises(FatbinError, match="lies outside the file"):
        read_fatbin_at(source, 8, len(VALID), ".nv_fatbin")
    with pytest.raises(
        FatbinError, match=r"\.nv_fatbin at offset 0x128: fat binary of 144 bytes, 136 left"
    ):
        read_fatbin_at(source, 0, len(VALID) - 8, ".nv_fatbin")


def test_distinct_merges_equal_images_counting_them_and_summing_sizes() -> None:
    one = fatbin(entry(ELF, 90), entry(PTX, 90, LINUX64, PTX_TEXT, (9, 0)))
    two = fatbin(entry(ELF, 90, payload=b"\x7fELF" + b"\x00" * 124), entry(ELF, 80))
    merged = devicecode.distinct(read_fatbin(one + two))
    assert [(e.target, e.count, e.size) for e in merged.entries] == [
        ("sm_90", 2, 64 + 128),
        ("compute_90", 1, len(PTX_TEXT) + (-len(PTX_TEXT) % 8)),
        ("sm_80", 1, 64),
    ]
    assert merged.sass_archs == ("sm_80", "sm_90") and merged.ptx_archs == ("compute_90",)


def test_records_round_trip_and_a_bad_record_is_an_error() -> None:
    code = devicecode.distinct(
        read_fatbin(fatbin(entry(PTX, 90, LINUX64 | ZSTD, b"\x28\xb5\x2f\xfd", (9, 0))))
    )
    assert devicecode.from_record(devicecode.to_record(code)) == code
    row = devicecode.to_record(code)
    row["entries"] = [["sass", "90"] * 7]  # 14 fields of the wrong types
    with pytest.raises((TypeError, ValueError)):
        devicecode.from_record(row)


def test_summary_names_sass_ptx_with_its_isa_and_relocatable_code_apart() -> None:
    linked = read_fatbin(fatbin(entry(ELF, 80), entry(PTX, 90, LINUX64, PTX_TEXT, (9, 0))))
    assert devicecode.summary(linked) == "SASS sm_80; PTX compute_90 (PTX ISA 9.0)"
    relocatable = read_fatbin(fatbin(entry(ELF, 80)), "__nv_relfatbin")
    assert (
        devicecode.summary(relocatable)
        == "relocatable only (for a device link): SASS sm_80; PTX none"
    )


# -- headers picked out of the stream -------------------------------------------------------------


def elf_with(fat: bytes, flags: int, at: int = 4096) -> bytes:
    """A minimal ELF64 file: its header, one PT_LOAD segment of ``flags`` holding ``fat`` at
    ``at``, and some zeros after it."""
    header = (
        b"\x7fELF\x02\x01\x01"
        + b"\x00" * 9
        + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    )
    segment = struct.pack("<IIQQQQQQ", 1, flags, at, at, at, len(fat), len(fat), 8)
    data = header + segment
    return data + b"\x00" * (at - len(data)) + fat + b"\x00" * 512


class Unreadable:
    """A source that fails every read: what was kept must be enough."""

    def __init__(self, size: int) -> None:
        self.size = size

    def range(self, offset: int, size: int) -> memoryview:
        raise AssertionError(f"read {size} bytes at {offset}")


def tapped(data: bytes, cuts: list[int], code_too: bool = False) -> Seen:
    tap = FatbinTap(code_too)
    edges = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
    for a, b in itertools.pairwise(edges):
        tap.feed(data[a:b])
    return tap.seen


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(1, 4096 + len(PADDED) + 600), max_size=12))
def test_the_headers_seen_in_a_read_only_segment_are_all_a_read_needs(cuts: list[int]) -> None:
    data = elf_with(PADDED, flags=4)  # PF_R
    seen = tapped(data, [*cuts, 100])  # the program headers are not all in the first part
    source = Unreadable(len(data))
    assert read_fatbin_at(source, 4096, len(PADDED), ".nv_fatbin", seen) == read_fatbin(PADDED)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(1, 4096 + len(PADDED) + 600), max_size=8), libc=st.booleans())
def test_with_code_too_an_executable_segment_is_searched_and_its_headers_are_all_a_read_needs(
    cuts: list[int], libc: bool
) -> None:
    from wheels.cuda import tap

    data = elf_with(PADDED, flags=5)  # PF_R | PF_X: one segment for code and data
    search = tap._memmem
    try:
        if not libc:  # the regular expression that stands in where libc's memmem is missing
            tap._memmem = lambda: None  # type: ignore[assignment]
        seen = tapped(data, [*cuts, 100], code_too=True)
    finally:
        tap._memmem = search
    source = Unreadable(len(data))
    assert read_fatbin_at(source, 4096, len(PADDED), ".nv_fatbin", seen) == read_fatbin(PADDED)


def test_an_executable_segment_is_not_searched_and_the_source_is_read_instead() -> None:
    data = elf_with(VALID, flags=5)  # PF_R | PF_X: an old single text segment
    seen = tapped(data, [3000, 5000])
    assert seen.bytes_at == {} and seen.nonzero_from == {}
    whole = Chunks([data])
    assert read_fatbin_at(whole, 4096, len(VALID), ".nv_fatbin", seen) == read_fatbin(VALID)
