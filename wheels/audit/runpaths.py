"""RUNPATH/RPATH entries that leave the install tree, judged by the order the loader searches.

An entry that leads out of the tree the wheel installs into (``$ORIGIN/../../jaxlib``, which
Bazel leaves behind) or that is absolute (``/home/runner/...``, a build directory) names a
directory the wheel does not own. ld.so searches a file's entries in order, for each need that
is not loaded yet, and after them the system's directories. Such an entry is a violation when,
for some needed library, it is searched *before* the place that resolves that library (a later
entry, into the wheel or a declared distribution, or the system's directories, which come after
every entry): whoever can write there decides what is loaded. Otherwise it is a warning: every
need it could be searched for is resolved by an entry before it, or is never searched (the
interpreter has loaded it already, or the loader ignores the entry). See
docs/audit-verdicts.md.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wheels.audit.ldso import outside_dir, runpath_dir
from wheels.audit_report import shorten

if TYPE_CHECKING:
    from collections.abc import Sequence

    from wheels.audit.findings import Findings
    from wheels.audit.ldso import Elves
    from wheels.audit_report import Need
    from wheels.elf import ElfInfo

# Loaded by every Python interpreter before any extension: a need of these is matched to the
# loaded object by its name and never searched for.
LOADED_BY_PYTHON = frozenset({"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"})
RULE = " (RUNPATH order rule, docs/audit-verdicts.md)"
_LOADER_PREFIXES = ("ld-linux", "ld64.so", "ld-musl-", "libc.musl-")


@dataclass(frozen=True, slots=True)
class Searched:
    """A need the loader searches this file's entries for, and what resolves it: the entry at
    ``at`` (0-based), or, at the end of the list, ``where`` (the system's directories)."""

    soname: str
    at: int
    where: str


@dataclass(frozen=True, slots=True)
class Leaving:
    """An entry that leaves the install tree: its place, text, and where it leads (the path
    from site-packages for an ``$ORIGIN`` entry, else the absolute path)."""

    which: str
    at: int
    entry: str
    leads: str

    @property
    def absolute(self) -> bool:
        return self.leads.startswith("/")

    def named(self) -> str:
        return f"{self.which.upper()} entry {self.at + 1} '{self.entry}'"


def judge_leaving_entries(ctx: Elves, f: Findings) -> None:
    """Every entry that leaves the install tree, of every ELF file: a violation where it is
    searched before what resolves a need, else a warning. After :func:`~ldso.resolve_all`."""
    in_python = {m for root in ctx.extensions for m in ctx.groups[root].members}
    for member in sorted(ctx.elfs):
        info = ctx.elfs[member]
        install = ctx.install_of.get(member)
        origin = posixpath.dirname(install) if install is not None else None
        for which in ("runpath", "rpath"):
            entries = info.split_path(which)
            leaving = [
                Leaving(which, i, e, out)
                for i, e in enumerate(entries)
                if (out := outside_dir(e, origin)) is not None
            ]
            if not leaving:
                continue
            if which == "rpath" and info.runpath is not None:
                for entry in leaving:
                    f.warning("runpath", member, _ignored(entry))
                continue
            searched = searched_needs(ctx, member, info, entries, origin, member in in_python)
            for entry in leaving:
                _judge(entry, entries, searched, member, f)


def searched_needs(
    ctx: Elves,
    member: str,
    info: ElfInfo,
    entries: Sequence[str],
    origin: str | None,
    in_python: bool,
) -> list[Searched]:
    """The needs of ``member`` that the loader searches its entries for, each with what
    resolves it; a need that is missing (a finding of its own) is left out."""
    dirs = [runpath_dir(e, origin)[0] for e in entries]
    found = []
    for need in ctx.needs.get(member, ()):
        if need.kind in ("missing", "libpython"):
            continue
        if in_python and (need.soname in LOADED_BY_PYTHON or _is_loader(need.soname)):
            continue  # (matched to the interpreter's own by name: not searched)
        found.append(_resolved_at(ctx, need, dirs))
    return found


def _is_loader(soname: str) -> bool:
    return soname.startswith(_LOADER_PREFIXES)


def _resolved_at(ctx: Elves, need: Need, dirs: Sequence[str | None]) -> Searched:
    """Where in the search ``need`` is found: the first entry that leads to the directory it
    resolves in, or after every entry."""
    directory = None
    if need.kind == "wheel" and need.where is not None:
        installed = ctx.install_of.get(need.where)
        directory = posixpath.dirname(installed) if installed is not None else None
    elif need.kind == "distribution":
        supplied = ctx.policy.supplier(need.soname)
        directory = supplied.dir if supplied is not None else _supplier_dir(need)
    if directory is not None and directory in dirs:
        return Searched(need.soname, dirs.index(directory), "")
    where = {
        "system": "the system's library directories (ld.so.cache, /lib, /usr/lib), which "
        "resolve it",
        "external": "the machine's library directories, where it is expected",
    }.get(need.kind, f"{need.where}, where it is found")
    return Searched(need.soname, len(dirs), where)


def _supplier_dir(need: Need) -> str | None:
    """The directory of a need resolved in another distribution (``where``: ``dist: path``)."""
    if need.where is None or ": " not in need.where:
        return None
    return posixpath.dirname(need.where.split(": ", 1)[1])


def _judge(
    entry: Leaving, entries: Sequence[str], searched: Sequence[Searched], member: str, f: Findings
) -> None:
    first = [s for s in searched if s.at > entry.at]
    if not first:
        f.warning("runpath", member, _harmless(entry, searched))
        return
    need = first[0]
    resolver = (
        f"entry {need.at + 1} '{entries[need.at]}', which resolves it"
        if need.at < len(entries)
        else need.where
    )
    others = [s.soname for s in first[1:]]
    also = f" (so too for {shorten(others, 3)})" if others else ""
    f.violation(
        "runpath",
        member,
        f"{entry.named()} {_leads(entry)}; the loader searches it for {need.soname} before "
        f"{resolver}{also}: {_writable(entry, need.soname)}{RULE}",
    )


def _leads(entry: Leaving) -> str:
    if entry.absolute:
        return "is an absolute directory outside the wheel (a build or toolkit directory?)"
    return f"leads out of the install tree (to {entry.leads} from site-packages)"


def _writable(entry: Leaving, soname: str) -> str:
    """A concrete install, or machine, on which another user can write where the entry leads."""
    if not entry.absolute:
        ups = entry.leads.split("/").count("..")
        target = "/tmp" + "/t" * ups
        landing = posixpath.normpath(posixpath.join(target, entry.leads))
        return (
            f"installed with `pip install --target {target}`, it is {landing}, which any user "
            f"can create in the world-writable /tmp, and a {soname} put there is loaded"
        )
    parts = entry.leads.split("/")
    if parts[1:2] in (["tmp"], ["var"]) and (parts[1] == "tmp" or parts[2:3] == ["tmp"]):
        who = "any user can create it in the world-writable temporary directory"
    elif parts[1:2] == ["home"] and len(parts) > 2:
        who = f"on a machine with a user named {parts[2]}, that user can create it"
    else:
        who = "whoever can create it, or write to it, on the machine it runs on, decides"
    return f"{who}, and a {soname} put there is loaded"


def _harmless(entry: Leaving, searched: Sequence[Searched]) -> str:
    if searched:
        return (
            f"{entry.named()} {_leads(entry)}, but comes after every entry that resolves a "
            f"need of this file ({shorten([s.soname for s in searched], 3)}): the loader "
            f"never reaches it for a library it finds, a leftover, harmless as installed{RULE}"
        )
    return (
        f"{entry.named()} {_leads(entry)}, but no need of this file is searched for there "
        "(what it needs the interpreter has loaded already): a leftover, harmless as "
        f"installed{RULE}"
    )


def _ignored(entry: Leaving) -> str:
    return (
        f"{entry.named()} {_leads(entry)}, but the file has a RUNPATH, so the loader ignores "
        f"its RPATH: a leftover, harmless as installed{RULE}"
    )
