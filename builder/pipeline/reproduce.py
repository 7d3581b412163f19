"""Reproducibility: the wheel built twice, the second time from fresh directories, compared
byte for byte.

The second build runs under a fresh state home and store whose paths are as long as those the
first build ran under (read from its store records): build directories and store entries are
new, sources come from the same git caches. The same length matters: CMake reserves room in each
binary for its build-tree RUNPATH (absolute store paths), so binaries built under homes of
different path lengths differ in layout however deterministic the compiler is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import string
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core.errors import EXIT_AUDIT, StackError
from builder.core.layout import Layout

if TYPE_CHECKING:
    from wheels.elf.reader import Image


class ReproducibilityError(StackError):
    """Two builds from the same inputs gave different wheels."""

    exit_code = EXIT_AUDIT


BUILD_HINT = (
    "something in the build depends on the time, the path or the machine "
    "(timestamps, random values, absolute paths)"
)
_MEMBERS = 8  # differing members named in the error (the rest counted)


def require_identical(first: Path, second: Path, *, hint: str = BUILD_HINT) -> None:
    """Raise ReproducibilityError naming every member in which the two wheels differ (the
    first :data:`_MEMBERS` of them, and how) unless they are the same bytes."""
    found = differences(first, second)
    if not found:
        return
    shown = found[:_MEMBERS]
    more = f"\n  and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
    members = "member" if len(found) == 1 else "members"
    raise ReproducibilityError(
        f"{first.name} is not reproducible: two builds from the same inputs differ in "
        f"{len(found)} {members}:\n  " + "\n  ".join(shown) + more,
        hint=hint,
    )


def differences(a: Path, b: Path) -> list[str]:
    """Nothing when the two wheels are byte-identical; else each member that differs and how
    (contents, with the ELF sections and symbols; zip attributes; presence; order)."""
    if a.read_bytes() == b.read_bytes():
        return []
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        left = {info.filename: info for info in za.infolist()}
        right = {info.filename: info for info in zb.infolist()}
        found = [f"{name}: only in the first wheel" for name in left if name not in right]
        found += [f"{name}: only in the second wheel" for name in right if name not in left]
        common = [name for name in left if name in right]
        if common != [name for name in right if name in left]:
            found.append("the members are in another order")
        for name in common:
            x, y = left[name], right[name]
            data_x, data_y = za.read(x), zb.read(y)
            if data_x != data_y:
                found.append(f"{name}: contents differ ({_content_note(data_x, data_y)})")
                continue
            for attr in ("date_time", "external_attr", "compress_type", "create_system"):
                if getattr(x, attr) != getattr(y, attr):
                    found.append(
                        f"{name}: {attr} differs ({getattr(x, attr)} vs {getattr(y, attr)})"
                    )
                    break
    return found or ["the zip archives differ outside their members (headers or comments)"]


def _content_note(x: bytes, y: bytes) -> str:
    if len(x) != len(y):
        note = f"{len(x)} vs {len(y)} bytes"
    else:
        offset = next(i for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q)
        note = f"same size, first difference at byte {offset}"
    where = elf_difference(x, y)
    return f"{note}; {where}" if where else note


# Symbol tables whose differing names are listed (at most this many each way).
_SYMBOL_TABLES = (".symtab", ".dynsym")
_SHOWN = 8


def elf_difference(x: bytes, y: bytes) -> str | None:
    """Which sections of two ELF files differ, by name, and for the symbol tables which symbol
    names are only in one of them; None when either is not ELF."""
    from wheels.elf.reader import ElfError, Image

    try:
        left, right = Image.parse(x), Image.parse(y)
        a, b = _sections(left), _sections(right)
    except ElfError:
        return None
    differ = [n for n in a if n in b and x[a[n][0] : a[n][1]] != y[b[n][0] : b[n][1]]]
    differ += [f"{n} (only in the first)" for n in a if n not in b]
    differ += [f"{n} (only in the second)" for n in b if n not in a]
    if not differ:
        return "ELF sections identical (the difference is in headers or padding)"
    parts = [f"ELF sections differ: {', '.join(differ)}"]
    for table in _SYMBOL_TABLES:
        if table in a and table in b:
            one, two = _symbol_names(left, table), _symbol_names(right, table)
            parts += _only_in(one - two, "first", table) + _only_in(two - one, "second", table)
    return "; ".join(parts)


def _sections(image: Image) -> dict[str, tuple[int, int]]:
    """Section name -> (start, end) in the file, for sections with bytes in the file."""
    from wheels.elf.reader import string_at

    index = image.header.shstrndx
    if not 0 < index < len(image.sections):
        return {}
    names = image.sections[index]
    table = image.reader.strings(names.offset, names.size, "section name table")
    nobits = 8  # SHT_NOBITS (.bss): no bytes in the file
    return {
        string_at(table, s.name): (s.offset, s.offset + s.size)
        for s in image.sections
        if s.sh_type not in (0, nobits) and s.name
    }


def _symbol_names(image: Image, name: str) -> set[str]:
    from wheels.elf.reader import linked_strtab, string_at

    section = image.section_named(name)
    if section is None or not section.entsize:
        return set()
    strtab = linked_strtab(image.reader, image.sections, section)
    fmt = image.reader.layout.fmt("I", "I")  # st_name comes first in both classes
    return {
        string_at(
            strtab, image.reader.unpack(fmt, section.offset + i * section.entsize, "symbol")[0]
        )
        for i in range(1, section.size // section.entsize)
    }


def _only_in(names: set[str], which: str, table: str) -> list[str]:
    if not names:
        return []
    shown = sorted(names)[:_SHOWN]
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return [f"{table} symbols only in the {which}: {', '.join(shown)}{more}"]


def dir_of_length(near: Path, length: int) -> Path:
    """Create a new directory whose absolute path is ``length`` characters long, beside ``near``
    when that is possible, else under the temporary directory or ``/``."""
    alphabet = string.ascii_lowercase + string.digits
    for parent in (near.parent, Path(tempfile.gettempdir()), Path("/")):
        room = length - len(str(parent)) - 1
        if room < 1 or not os.access(parent, os.W_OK):
            continue
        for _ in range(1000):
            # Path components stay under 200 characters: a long name becomes nested ones.
            name = "".join(secrets.choice(alphabet) for _ in range(room))
            parts = [name[i : i + 200] for i in range(0, len(name), 201)]
            candidate = parent.joinpath(*parts) if len(parts) > 1 else parent / name
            if len(str(candidate)) != length:
                continue
            with contextlib.suppress(FileExistsError):
                candidate.parent.mkdir(parents=True, exist_ok=True)
                candidate.mkdir()
                return candidate
    raise StackError(f"cannot create a directory with a path of {length} characters near {near}")


def built_under(record: dict[str, Any]) -> tuple[Path, Path] | None:
    """The (home, store root) a store entry was built under, read from its record."""
    build_dir = record.get("build_dir")
    prefix = None
    for command in record.get("commands", []):
        argv = command.get("argv", command) if isinstance(command, dict) else command
        prefix = next(
            (
                a.split("=", 1)[1]
                for a in argv
                if isinstance(a, str) and a.startswith("-DCMAKE_INSTALL_PREFIX=")
            ),
            prefix,
        )
    if not build_dir or not prefix:
        return None
    return Path(build_dir).parent.parent, Path(prefix).parent.parent


@contextlib.contextmanager
def fresh_layout(layout: Layout, like: tuple[Path, Path] | None = None) -> Iterator[Layout]:
    """A fresh home and store, removed afterwards, whose paths are as long as ``like``'s (the home
    and store the first build ran under), or else as ``layout``'s."""
    home_like, store_like = like or (layout.home, layout.store_root)
    made: list[Path] = []
    try:
        home = dir_of_length(layout.home, len(str(home_like)))
        made.append(home)
        if store_like == home_like / "store":
            store = home / "store"
        else:
            store = dir_of_length(layout.store_root, len(str(store_like)))
            made.append(store)
        yield Layout(home=home, store_root=store)
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
