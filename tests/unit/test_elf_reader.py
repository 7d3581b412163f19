"""The in-process ELF reader (wheels.elf): the facts pyelftools reads, and ElfError on garbage."""

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
    build_id_span,
    defined_functions,
    dynamic,
    from_record,
    looks_like_elf,
    read_elf,
    read_elf_file,
    section_bytes,
    section_span,
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


def fake_elf(**changes: object) -> ElfInfo:
    base = read_elf_file(
        next(
            Path(d) / "libc.so.6"
            for d in ("/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/usr/lib")
            if (Path(d) / "libc.so.6").exists()
        )
    )
    from dataclasses import replace

    return replace(base, **changes)


def test_versioned_reference_binds_to_an_unversioned_definition_in_a_versioned_library() -> None:
    lib = fake_elf(
        export_names="f\0k",
        export_versions="\0\2",
        def_versions=("", "", "V4"),
        hidden_versioned=frozenset({"g@V2"}),
        has_versym=True,
    )
    assert lib.exports_versioned == {"k@V4", "g@V2"} and lib.exports_unversioned == {"f"}
    assert lib.defines("k", "V4") and not lib.defines("k", "V2")
    assert lib.defines("f", "V1")  # ld.so accepts a base definition for a versioned need
    assert lib.defines("g", "V2") and not lib.defines("g", "V3")
    assert not lib.defines("h", "")


def test_library_without_version_table_binds_any_version_by_name() -> None:
    lib = fake_elf(
        export_names="f",
        export_versions="\0",
        def_versions=(),
        hidden_versioned=frozenset(),
        has_versym=False,
    )
    assert lib.exports_versioned == frozenset() and lib.exports_unversioned is None
    assert lib.defines("f", "ANY_1.0")


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
    import pickle
    from dataclasses import replace

    base = read_elf_file(host_lib("libm.so.6"))
    info = replace(
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
    """The file read, or None on ElfError. Read with its symbols for later, it fails alike
    (what decoding them would refuse shows at the read), and is then looked up and decoded
    to the same result, raising nothing."""
    try:
        info: ElfInfo | None = read_elf(data)
    except ElfError:
        info = None
    try:
        later: ElfInfo | None = read_elf(data, symbols_later=True)
    except ElfError:
        later = None
    assert (later is None) == (info is None)
    if later is not None:
        later.defines("PyInit_x", "")
        later.defines("memcpy", "GLIBC_2.14")
        assert later == info
    return info


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


# ---------------------------------------------------------------------------------------------
# the small questions other readers ask: a section, the dynamic segment, exports, the build-id


@pytest.mark.parametrize("name", ["libstdc++.so.6", "libc.so.6", "libm.so.6"])
def test_sections_by_name_are_where_pyelftools_finds_them(name: str) -> None:
    from collections import Counter

    from elftools.elf.elffile import ELFFile

    path = host_lib(name)
    data = path.read_bytes()
    with path.open("rb") as fh:
        sections = list(ELFFile(fh).iter_sections())
        named = Counter(s.name for s in sections)
        checked = 0
        for section in sections:
            # A repeated name is looked up as the first; pyelftools keeps the last.
            if not section.name or named[section.name] > 1 or section["sh_type"] == "SHT_NOBITS":
                continue
            span = (section["sh_offset"], section["sh_size"])
            assert section_span(path, section.name) == span, section.name
            assert section_bytes(data, section.name) == section.data(), section.name
            checked += 1
    assert checked >= 20
    assert section_span(path, ".no-such-section") is None
    assert section_bytes(path, ".bss") == b""


def test_dynamic_alone_agrees_with_the_full_read() -> None:
    for name in ("libstdc++.so.6", "libc.so.6", "libgcc_s.so.1"):
        path = host_lib(name)
        info, dyn = read_elf_file(path), dynamic(path)
        assert (dyn.soname, dyn.needed, dyn.rpath, dyn.runpath, dyn.interpreter) == (
            info.soname,
            info.needed,
            info.rpath,
            info.runpath,
            info.interpreter,
        )
        assert dyn.search == tuple(p for p in (info.rpath, info.runpath) if p is not None)


def test_defined_functions_are_readelfs_global_default_defined_funcs() -> None:
    from elftools.elf.elffile import ELFFile

    path = host_lib("libstdc++.so.6")
    with path.open("rb") as fh:
        expected = [
            s.name
            for s in ELFFile(fh).get_section_by_name(".dynsym").iter_symbols()
            if s["st_info"]["type"] == "STT_FUNC"
            and s["st_info"]["bind"] == "STB_GLOBAL"
            and s["st_other"]["visibility"] == "STV_DEFAULT"
            and s["st_shndx"] != "SHN_UNDEF"
        ]
    assert defined_functions(path) == expected and len(expected) > 1000


def test_build_id_is_the_descriptor_of_the_gnu_build_id_note() -> None:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import NoteSection

    path = host_lib("libstdc++.so.6", "libc.so.6")
    data = path.read_bytes()
    with path.open("rb") as fh:
        note = next(
            n
            for s in ELFFile(fh).iter_sections()
            if isinstance(s, NoteSection)
            for n in s.iter_notes()
            if n["n_type"] == "NT_GNU_BUILD_ID"
        )
    span = build_id_span(data)
    assert span is not None
    start, size = span
    assert data[start : start + size].hex() == note["n_desc"]
    assert build_id_span(path) == span


def test_small_readers_raise_elf_error_on_garbage(tmp_path: Path) -> None:
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\xff" * 100)
    for read in (dynamic, defined_functions, build_id_span):
        with pytest.raises(ElfError):
            read(junk)
    with pytest.raises(ElfError):
        section_bytes(SEED[:200], ".dynsym")
