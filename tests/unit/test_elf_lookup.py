"""Definitions looked up in an ELF file's own hash table (wheels.elf.lookup) answer as the
decoded definitions do, on this host's libraries and on gcc-built ones with compat versions,
every visibility and both hash styles; the file's symbol fields are decoded when read."""

from __future__ import annotations

import gc
import pickle
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.wheelmaker import EXT, TAG, Compiler, have_gcc, make_wheel
from wheels.audit import audit_wheel
from wheels.elf import ElfError, ElfInfo, HostLibraries, lookup
from wheels.elf import hostlibs as hostlibs_module
from wheels.elf.decode import read_elf, read_elf_file
from wheels.elf.lookup import HashedSymbols, gnu_hash, sysv_hash
from wheels.policy import host_library_dirs, load_vendor_policy

HOST = HostLibraries(host_library_dirs())
HOST_LIBRARIES = ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"]


def host_lib(name: str) -> Path:
    for d in HOST.dirs:
        path = Path(d) / name
        if path.is_file():
            return path.resolve()
    pytest.skip(f"no {name} on this host")


def hashed(info: ElfInfo) -> HashedSymbols:
    later = info.__dict__.get("_symbols_later")
    assert later is not None, "read with its symbols decoded"
    found: HashedSymbols = later[0]
    return found


def queries(full: ElfInfo) -> list[tuple[str, str]]:
    """Every definition at its own version, every name at none and at versions it lacks, and
    names the file does not define."""
    names = sorted(full.exports)
    versions = sorted(full.version_defs) or ["V_1"]
    out = [(n, v) for n, _, v in (x.partition("@") for x in sorted(full.exports_versioned))]
    out += [(n, "") for n in names]
    out += [(n, v) for n in names[:300] for v in (*versions[:4], "NO_SUCH_9.9")]
    out += [(n, v) for n in full.undefined[:100] for v in ("", versions[0])]
    out += [(f"absent_{i}", v) for i in range(40) for v in ("", versions[-1])]
    return out


def assert_answers_alike(data: bytes) -> tuple[int, int]:
    full = read_elf(data)
    lazy = read_elf(data, symbols_later=True)
    asked = queries(full)
    said = [lazy.defines(name, version) for name, version in asked]
    assert said == [full.defines(name, version) for name, version in asked]
    assert "export_names" not in lazy.__dict__  # (every answer came from the hash table)
    return said.count(True), said.count(False)


@pytest.mark.parametrize("name", HOST_LIBRARIES)
def test_hash_lookups_answer_as_the_decoded_definitions_on_host_libraries(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lookup, "LOOKUPS", 10**9)
    yes, no = assert_answers_alike(host_lib(name).read_bytes())
    assert yes > 100 and no > 40


VERSIONED = """
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
__asm__(".symver foo_v1,foo@VERS_1");
__asm__(".symver foo_v2,foo@@VERS_2");
__attribute__((visibility("protected"))) int prot(void) { return 3; }
__attribute__((visibility("hidden"))) int hid(void) { return 4; }
__attribute__((weak)) int weak_fn(void) { return 5; }
int data_obj = 6;
extern int external_ref(void);
int calls(void) { return external_ref() + hid(); }
"""
SCRIPT = """
VERS_1 { global: foo; local: *; };
VERS_2 { global: prot; weak_fn; data_obj; calls; } VERS_1;
"""


@pytest.mark.skipif(not have_gcc(), reason="needs gcc")
@pytest.mark.parametrize("style", ["gnu", "sysv"])
@pytest.mark.parametrize("versioned", [True, False])
def test_hash_lookups_answer_as_the_decoded_definitions_on_built_libraries(
    tmp_path: Path, style: str, versioned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lookup, "LOOKUPS", 10**9)
    script = tmp_path / "vers.map"
    script.write_text(SCRIPT)
    flags = [f"-Wl,--hash-style={style}"]
    source = VERSIONED  # (without a version script, no .symver: from its first attribute on)
    if versioned:
        flags.append(f"-Wl,--version-script={script}")
    else:
        source = VERSIONED[VERSIONED.index("__attribute__") :]
    lib = Compiler(tmp_path).shared("libv.so", source, flags=flags)
    data = lib.read_bytes()
    assert_answers_alike(data)
    lazy = read_elf(data, symbols_later=True)
    assert hashed(lazy).gnu is (style == "gnu")
    full = read_elf(data)
    cases = [("prot", ""), ("hid", ""), ("weak_fn", ""), ("data_obj", ""), ("calls", "")]
    cases += [("external_ref", ""), ("foo", "VERS_1"), ("foo", "VERS_2"), ("foo", "")]
    cases += [("prot", "VERS_2"), ("prot", "VERS_1"), ("nothing", "VERS_2")]
    answers = {c: lazy.defines(*c) for c in cases}
    assert answers == {c: full.defines(*c) for c in cases}
    assert not answers[("hid", "")] and not answers[("external_ref", "")]
    assert answers[("prot", "")] and answers[("weak_fn", "")] and answers[("data_obj", "")]
    if versioned:  # the compat version by its name, the default one by its name or none
        assert answers[("foo", "VERS_1")] and answers[("foo", "VERS_2")] and answers[("foo", "")]


def test_the_hashes_are_the_loaders() -> None:
    # (values from the System V ABI and the GNU hash's definition, h = h * 33 + c from 5381)
    assert gnu_hash(b"") == 5381
    assert gnu_hash(b"printf") == 0x156B2BB8
    assert sysv_hash(b"printf") == 0x077905A6
    assert sysv_hash(b"") == 0


def test_reading_a_symbol_field_decodes_them_all_and_equals_the_full_read() -> None:
    data = host_lib("libc.so.6").read_bytes()
    full, lazy = read_elf(data), read_elf(data, symbols_later=True)
    assert "export_names" not in lazy.__dict__
    assert lazy.undefined_weak == full.undefined_weak  # (any of them decodes all)
    assert "export_names" in lazy.__dict__
    assert lazy == full and lazy.exports == full.exports
    again = pickle.loads(pickle.dumps(read_elf(data, symbols_later=True)))
    assert again == full
    with pytest.raises(AttributeError):
        lazy.no_such_field  # noqa: B018 (any other missing name is still missing)


def test_past_its_lookups_a_library_is_decoded_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lookup, "LOOKUPS", 3)
    data = host_lib("libc.so.6").read_bytes()
    full, lazy = read_elf(data), read_elf(data, symbols_later=True)
    asked = [("printf", "GLIBC_2.2.5"), ("memcpy", "GLIBC_2.14"), ("nope", ""), ("free", "")]
    assert [lazy.defines(*q) for q in asked[:3]] == [full.defines(*q) for q in asked[:3]]
    assert "export_names" not in lazy.__dict__
    assert lazy.defines(*asked[3]) == full.defines(*asked[3])
    assert "export_names" in lazy.__dict__


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="needs objcopy")
def test_a_library_without_a_hash_table_is_decoded_at_once(tmp_path: Path) -> None:
    bare = tmp_path / "libc-nohash.so"
    src = host_lib("libm.so.6")
    argv = ["objcopy", "--remove-section=.gnu.hash", "--remove-section=.hash", str(src), str(bare)]
    subprocess.run(argv, check=True, capture_output=True)
    info = read_elf_file(bare, symbols_later=True)
    assert "_symbols_later" not in info.__dict__ and info == read_elf_file(src)


def test_host_libraries_keep_symbols_for_later_only_when_asked() -> None:
    libc = read_elf_file(host_lib("libc.so.6"))
    eager = HostLibraries(host_library_dirs()).find("libc.so.6", libc)
    later = HostLibraries(host_library_dirs(), symbols_later=True).find("libc.so.6", libc)
    assert eager is not None and later is not None
    assert "_symbols_later" not in eager[1].__dict__
    assert "export_names" not in later[1].__dict__ and later[1] == eager[1]


BINDS_TO_LIBC = """
#include <unistd.h>
extern void *PyLong_FromLong(long);
void *PyInit__bind(void) { return PyLong_FromLong((long)getpid()); }
"""


@pytest.mark.skipif(not have_gcc(), reason="needs gcc")
def test_a_small_wheels_audit_decodes_no_host_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ext = Compiler(tmp_path / "build").shared(f"_bind{EXT}", BINDS_TO_LIBC)
    files: dict[str, bytes | Path] = {"bind/__init__.py": b"", f"bind/_bind{EXT}": ext}
    wheel = make_wheel(tmp_path, files, name="bind", tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64")
    read: list[ElfInfo] = []
    real_read = hostlibs_module._try_read

    def spy(path: str, symbols_later: bool) -> ElfInfo | None:
        info = real_read(path, symbols_later)
        if info is not None:
            read.append(info)
        return info

    monkeypatch.setattr(hostlibs_module, "_try_read", spy)
    result = audit_wheel(wheel, load_vendor_policy("cpu"))
    assert result.ok, result.findings
    assert any(i.soname == "libc.so.6" for i in read)
    assert all("export_names" not in i.__dict__ for i in read), [i.soname for i in read]
    assert result.elfs[0].symbols.bound == 1  # (getpid, in libc)


def _open_fds() -> set[str]:
    return {p.name for p in Path("/proc/self/fd").iterdir()}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_file_read_for_later_stays_open_until_its_info_goes_and_decodes_from_it() -> None:
    path = host_lib("libc.so.6")
    before = _open_fds()
    lazy = read_elf_file(path, symbols_later=True)
    assert len(_open_fds() - before) == 1  # (its definitions are still to be read from it)
    assert "export_names" not in lazy.__dict__
    assert lazy.undefined_weak == read_elf(path.read_bytes()).undefined_weak  # decodes them all
    assert lazy == read_elf(path.read_bytes())
    del lazy
    gc.collect()
    assert _open_fds() <= before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_file_read_at_once_or_refused_leaves_no_file_open(tmp_path: Path) -> None:
    text = tmp_path / "libnot.so"
    text.write_text("not an ELF file\n")
    before = _open_fds()
    info = read_elf_file(host_lib("libm.so.6"))
    assert _open_fds() <= before and info == read_elf(host_lib("libm.so.6").read_bytes())
    with pytest.raises(ElfError, match="not an ELF file"):
        read_elf_file(text, symbols_later=True)
    assert _open_fds() <= before


def test_a_path_that_is_not_a_readable_file_is_an_elf_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match=f"cannot read {re.escape(str(tmp_path))}"):
        read_elf_file(tmp_path)  # a directory: opened, then read
    with pytest.raises(ElfError, match=r"cannot read .*missing\.so"):
        read_elf_file(tmp_path / "missing.so")
