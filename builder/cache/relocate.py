"""Relocatable entries: what in an entry names the store (or home) it was built under, recorded
at push time and rewritten at pull time for the puller's store and home.

Three kinds of place can be rewritten:

- ``elf``: a path inside an ELF file's DT_RUNPATH, DT_RPATH or DT_NEEDED string; patchelf sets the
  rewritten string (``--set-rpath``, ``--force-rpath`` for DT_RPATH, ``--replace-needed``), as
  ``wheels/assemble.py`` rewrites RUNPATHs;
- ``text``: a file without NUL bytes (CMake package files, pkg-config files, scripts, headers):
  byte substitution, the file's mode kept;
- ``symlink``: an absolute link target.

Anything else that names a root is *stuck*: a path in an ELF file outside those strings
(``__FILE__`` in .rodata, debug info) or in another binary file. A stuck entry is reported by
file and byte offset at push time and not pushed. Padding the prefix so that compiled-in paths
could be overwritten in place (conda-build's way) was not chosen: every store and home would need
the padded length, a path that is only part of a longer string (a message with the path in it)
cannot be shortened in place, and ``-ffile-prefix-map`` cures the cause at the compiler instead.

A root is matched only as a whole path: ``/a/home`` in ``/a/home/store`` or ``/a/home"``, never
in ``/a/home2``; the longer root wins (the store usually lies inside the home).
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from builder.core import proc
from builder.core.errors import BuildError
from builder.core.fs import atomic_write

ELF_MAGIC = b"\x7fELF"
FixKind = Literal["elf", "text", "symlink"]
MAX_STUCK = 20  # findings kept per entry: enough to act on


@dataclass(frozen=True)
class Fix:
    path: str  # relative to the entry's prefix
    kind: FixKind


@dataclass(frozen=True)
class Stuck:
    """A root inside compiled code or another binary: it cannot be rewritten."""

    path: str
    offset: int
    text: str  # the string around it

    def __str__(self) -> str:
        return f"{self.path} at byte {self.offset}: {self.text!r}"


@dataclass(frozen=True)
class Scan:
    roots: Mapping[str, str]  # name (store, home) -> the absolute path it was built under
    fixes: tuple[Fix, ...]
    stuck: tuple[Stuck, ...]

    def table(self) -> dict[str, Any]:
        """The relocation table as the artifact's config carries it."""
        return {
            "roots": dict(self.roots),
            "files": [{"path": f.path, "kind": f.kind} for f in self.fixes],
        }


def root_pattern(roots: Iterator[str] | list[str]) -> re.Pattern[bytes]:
    """Any of ``roots`` as a whole path, the longest first."""
    ordered = sorted({r.rstrip("/") for r in roots if r.strip("/")}, key=len, reverse=True)
    alternatives = b"|".join(re.escape(r.encode()) for r in ordered)
    return re.compile(b"(?:" + alternatives + rb")(?![A-Za-z0-9_.+~-])")


def scan(prefix: Path, roots: Mapping[str, str]) -> Scan:
    """Every place under ``prefix`` that names one of ``roots``, sorted by path."""
    pattern = root_pattern(list(roots.values()))
    fixes: list[Fix] = []
    stuck: list[Stuck] = []
    for path in sorted(_files(prefix)):
        rel = path.relative_to(prefix).as_posix()
        if path.is_symlink():
            if pattern.search(str(path.readlink()).encode()):
                fixes.append(Fix(rel, "symlink"))
            continue
        kind, found = _classify(path, rel, pattern)
        if kind is not None:
            fixes.append(Fix(rel, kind))
        stuck.extend(found[: MAX_STUCK - len(stuck)])
    return Scan(roots=dict(roots), fixes=tuple(fixes), stuck=tuple(stuck))


def _files(prefix: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(prefix):
        base = Path(dirpath)
        yield from (base / d for d in dirnames if (base / d).is_symlink())
        yield from (base / f for f in filenames)


def _classify(
    path: Path, rel: str, pattern: re.Pattern[bytes]
) -> tuple[FixKind | None, list[Stuck]]:
    """How a regular file naming a root can be fixed, and where it cannot."""
    if path.stat().st_size == 0:
        return None, []
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        offsets = [m.start() for m in pattern.finditer(data)]
        if not offsets:
            return None, []
        if data[:4] == ELF_MAGIC:
            fixable = _dynamic_spans(path, data)
            stuck = [
                _stuck(rel, data, o) for o in offsets if not any(a <= o < b for a, b in fixable)
            ]
            return ("elf" if len(stuck) < len(offsets) else None), stuck
        if data.find(b"\0") < 0:
            return "text", []
        return None, [_stuck(rel, data, o) for o in offsets]


def _dynamic_spans(path: Path, data: mmap.mmap) -> list[tuple[int, int]]:
    """File offsets of the DT_RUNPATH, DT_RPATH and DT_NEEDED strings in ``.dynstr``."""
    from wheels.elf.dynamic import read_dynamic
    from wheels.elf.reader import ElfError, opened

    try:
        with opened(path) as image:
            section = image.section_named(".dynstr")
            dyn = read_dynamic(image, every_path=True)
    except ElfError:
        return []
    if section is None:
        return []
    wanted = {s.encode() for s in (*dyn.search, *dyn.needed)}
    spans = []
    start = section.offset
    end = section.offset + section.size
    while start < end:
        stop = data.find(b"\0", start, end)
        stop = end if stop < 0 else stop
        if data[start:stop] in wanted:
            spans.append((start, stop))
        start = stop + 1
    return spans


def _stuck(rel: str, data: mmap.mmap, offset: int) -> Stuck:
    begin = max(data.rfind(b"\0", max(0, offset - 200), offset) + 1, offset - 200, 0)
    end = data.find(b"\0", offset, offset + 200)
    end = offset + 120 if end < 0 else end
    return Stuck(rel, offset, data[begin:end].decode("utf-8", "backslashreplace")[:160])


# --- at pull time -------------------------------------------------------------------------------


def substituter(mapping: Mapping[str, str]) -> Callable[[bytes], bytes]:
    """A function giving bytes with each old root (a key of ``mapping``) replaced by its new one."""
    if not mapping:
        return lambda data: data
    pattern = root_pattern(list(mapping))
    table = {k.rstrip("/").encode(): v.rstrip("/").encode() for k, v in mapping.items()}
    return lambda data: pattern.sub(lambda m: table[m.group(0)], data)


def substitute(text: str, mapping: Mapping[str, str]) -> str:
    """``text`` with each old root (a key of ``mapping``) replaced by its new one."""
    return substituter(mapping)(text.encode()).decode() if mapping else text


def substitute_data(data: Any, mapping: Mapping[str, str]) -> Any:
    """:func:`substitute` applied to every string of a JSON-like structure (a store record)."""
    if isinstance(data, str):
        return substitute(data, mapping)
    if isinstance(data, dict):
        return {k: substitute_data(v, mapping) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute_data(v, mapping) for v in data]
    return data


def mapping_for(table: Mapping[str, Any], new_roots: Mapping[str, str]) -> dict[str, str]:
    """Old root -> new root, for the roots that differ."""
    old = table.get("roots") or {}
    return {
        str(path): str(new_roots[name])
        for name, path in old.items()
        if name in new_roots and str(path) != str(new_roots[name])
    }


def relocate(prefix: Path, table: Mapping[str, Any], mapping: Mapping[str, str]) -> list[str]:
    """Rewrite every place the table lists, under ``prefix``; returns the files rewritten.
    Raises :class:`BuildError` for a table that names a place outside the entry (also through
    a link) or a kind it does not know."""
    if not mapping:
        return []
    rewrite = substituter(mapping)
    done = []
    for item in table.get("files") or []:
        rel = str(item["path"])
        path = inside(prefix, rel)
        kind = item["kind"]
        if kind == "symlink":
            target = substitute(str(path.readlink()), mapping)
            path.unlink()
            path.symlink_to(target)
        elif kind == "text":
            mode = path.stat().st_mode
            atomic_write(path, rewrite(path.read_bytes())).chmod(mode & 0o7777)
        elif kind == "elf":
            _rewrite_elf(path, mapping)
        else:
            raise BuildError(f"unknown relocation kind {kind!r} for {rel}")
        done.append(rel)
    return done


def inside(prefix: Path, rel: str) -> Path:
    """``prefix / rel``, its directories resolved: a BuildError when that leaves ``prefix``
    (an absolute or climbing name, or a directory that is a link out of the entry)."""
    if rel.startswith("/") or ".." in Path(rel).parts:
        raise BuildError(f"the relocation table names {rel!r}, outside the entry")
    path = prefix / rel
    if not path.parent.resolve().is_relative_to(prefix.resolve()):
        raise BuildError(f"the relocation table names {rel!r}, through a link out of the entry")
    return path


def _rewrite_elf(path: Path, mapping: Mapping[str, str]) -> None:
    from wheels.assemble import patchelf
    from wheels.elf.dynamic import dynamic

    dyn = dynamic(path)
    tool = patchelf()
    argv: list[str] = []
    if dyn.runpath is not None and dyn.runpath != (new := substitute(dyn.runpath, mapping)):
        argv += ["--set-rpath", new]
    elif dyn.rpath is not None and dyn.rpath != (new := substitute(dyn.rpath, mapping)):
        argv += ["--force-rpath", "--set-rpath", new]
    for need in dyn.needed:
        if (new := substitute(need, mapping)) != need:
            argv += ["--replace-needed", need, new]
    if argv:
        proc.run([tool, *argv, str(path)], what=f"patchelf (relocating {path.name})")


def leftovers(prefix: Path, table: Mapping[str, Any], old: list[str]) -> list[str]:
    """Files the table lists that still name an old root after :func:`relocate`."""
    if not old:
        return []
    pattern = root_pattern(old)
    left = []
    for item in table.get("files") or []:
        path = inside(prefix, str(item["path"]))
        data = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
        if pattern.search(data):
            left.append(str(item["path"]))
    return left
