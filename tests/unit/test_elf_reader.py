"""The in-process ELF reader: same facts as pyelftools, and only ElfError on garbage."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wheels.elf import (
    Chunks,
    ElfError,
    ElfInfo,
    HostLibraries,
    from_record,
    looks_like_elf,
    read_elf,
    read_elf_file,
    to_record,
)
from wheels.policy import host_library_dirs

HOST = HostLibraries(host_library_dirs())


def host_lib(*names: str) -> Path:
    for name in names:
        for d in HOST.dirs:
            path = Path(d) / name
            if path.is_file():
                return path.resolve()
    pytest.skip(f"none of {names} on this host")


def pyelftools_facts(path: Path) -> dict[str, object]:
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as fh:
        elf = ELFFile(fh)
        needed: list[str] = []
        soname = runpath = None
        for seg in elf.iter_segments():
            if isinstance(seg, DynamicSegment):
                for tag in seg.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        soname = tag.soname
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        runpath = tag.runpath
        verneed = elf.get_section_by_name(".gnu.version_r")
        needs = (
            [(v.name, tuple(a.name for a in it)) for v, it in verneed.iter_versions()]
            if verneed
            else []
        )
        undefined = {
            s.name
            for s in elf.get_section_by_name(".dynsym").iter_symbols()
            if s.name and s["st_shndx"] == "SHN_UNDEF" and s["st_info"]["bind"] != "STB_WEAK"
        }
    return {
        "needed": tuple(needed),
        "soname": soname,
        "runpath": runpath,
        "needs": needs,
        "undefined": undefined,
    }


@pytest.mark.parametrize(
    "names", [("libc.so.6",), ("libstdc++.so.6",), ("libm.so.6",), ("libgcc_s.so.1",)]
)
def test_reader_agrees_with_pyelftools_on_host_libraries(names: tuple[str, ...]) -> None:
    path = host_lib(*names)
    info = read_elf_file(path)
    ref = pyelftools_facts(path)
    assert info.needed == ref["needed"]
    assert info.soname == ref["soname"]
    assert info.runpath == ref["runpath"]
    assert [(n.file, n.versions) for n in info.version_needs] == ref["needs"]
    assert set(info.undefined) == ref["undefined"]


def test_versioned_exports_of_libc_include_default_and_compat_versions() -> None:
    info = read_elf_file(host_lib("libc.so.6"))
    assert info.defines("memcpy", "GLIBC_2.2.5")  # the old compat version, still bindable
    assert info.defines("memcpy", "GLIBC_2.14")
    assert info.defines("memcpy", "")
    assert not info.defines("memcpy", "GLIBC_9.99")
    assert not info.defines("no_such_symbol_anywhere", "")


def test_reading_from_many_small_parts_equals_reading_whole_bytes() -> None:
    data = host_lib("libstdc++.so.6").read_bytes()
    parts = [data[i : i + 4093] for i in range(0, len(data), 4093)]
    assert read_elf(Chunks(parts)) == read_elf(data)


def test_chunks_range_crossing_parts_is_joined() -> None:
    chunks = Chunks([b"abc", b"", b"defg", b"h"])
    assert bytes(chunks.range(2, 4)) == b"cdef"
    assert bytes(chunks.range(6, 2)) == b"gh"
    assert chunks.size == 8


def test_record_round_trip_keeps_every_fact() -> None:
    info = read_elf_file(host_lib("libstdc++.so.6"))
    assert from_record(to_record(info)) == info


@pytest.mark.parametrize(
    ("undefined", "versions"),
    [((), ()), (("a",), ("",)), (("a", "b"), ("", "V_1")), (("",), ("",))],
)
def test_pickle_round_trip_keeps_one_element_and_empty_name_lists(
    undefined: tuple[str, ...], versions: tuple[str, ...]
) -> None:
    import dataclasses
    import pickle

    base = read_elf_file(host_lib("libm.so.6"))
    info = dataclasses.replace(
        base,
        undefined=undefined,
        undefined_versions=versions,
        entry_points=frozenset({""}),
        version_defs=(),
    )
    assert pickle.loads(pickle.dumps(info)) == info


def test_non_elf_and_short_inputs_raise_elf_error() -> None:
    for data in (b"", b"\x7fELF", b"hello world" * 10, b"\x7fELF" + b"\x09" * 60):
        with pytest.raises(ElfError):
            read_elf(data)


def test_member_named_like_a_library_or_starting_with_magic_must_parse() -> None:
    assert looks_like_elf("pkg/lib/libx.so.1", b"text")
    assert looks_like_elf("pkg/lib/_x.cpython-311-x86_64-linux-gnu.so", b"")
    assert looks_like_elf("pkg/bin/tool", b"\x7fELF")
    assert not looks_like_elf("pkg/data.sol", b"text")


def test_host_lookup_finds_libc_and_not_an_absent_library() -> None:
    like = read_elf_file(host_lib("libc.so.6"))
    assert HOST.find("libc.so.6", like) is not None
    assert HOST.find("libdoesnotexist.so.9", like) is None


# ---------------------------------------------------------------------------------------------
# garbage: whatever the bytes, ElfError or a result, never another exception

SMALL = host_lib("libpthread.so.0", "libdl.so.2", "libutil.so.1", "libgcc_s.so.1")
SEED = SMALL.read_bytes()
HEADER_FIELDS = [
    (0x20, "<Q"),
    (0x28, "<Q"),
    (0x36, "<H"),
    (0x38, "<H"),
    (0x3A, "<H"),
    (0x3C, "<H"),
    (0x3E, "<H"),
    (0x04, "<B"),
    (0x05, "<B"),
]


def parse_or_elf_error(data: bytes) -> ElfInfo | None:
    try:
        return read_elf(data)
    except ElfError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=40))
def test_flipped_bytes_give_elf_error_or_a_result(flips: list[tuple[int, int]]) -> None:
    data = bytearray(SEED)
    for offset, value in flips:
        data[offset] = value
    parse_or_elf_error(bytes(data))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(HEADER_FIELDS), st.integers(0, 2**64 - 1), st.integers(0, len(SEED)))
def test_bogus_header_fields_and_truncation_give_elf_error_or_a_result(
    field: tuple[int, str], value: int, cut: int
) -> None:
    offset, fmt = field
    data = bytearray(SEED)
    size = struct.calcsize(fmt)
    data[offset : offset + size] = struct.pack(fmt, value % (1 << (8 * size)))
    parse_or_elf_error(bytes(data[:cut]))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(SEED) - 8), st.sampled_from([0, 0xFFFFFFFF, 0x7FFFFFFF, 1 << 31]))
def test_huge_counts_and_offsets_anywhere_give_elf_error_or_a_result(
    offset: int, value: int
) -> None:
    data = bytearray(SEED)
    data[offset : offset + 4] = struct.pack("<I", value)
    parse_or_elf_error(bytes(data))
