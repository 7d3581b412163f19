"""Read what the dynamic loader reads from an ELF file, in process, from bytes in memory: the one
ELF reader of this tree (the audit, the assembler and the providers' probes all use it).

Only the few tables an audit needs are decoded: program headers, the dynamic segment, the dynamic
symbol table with its string table, the GNU version tables and the GNU property notes. Every
offset and count is checked against the buffer, so garbage raises :class:`ElfError` (and nothing
else).

- :func:`read_elf`, :func:`read_elf_file`: everything at once, as :class:`ElfInfo`
  (:mod:`~wheels.elf.decode`);
- :func:`dynamic`: the dynamic segment alone (:mod:`~wheels.elf.dynamic`);
- :func:`defined_functions`: the functions ``.dynsym`` exports (:mod:`~wheels.elf.symbols`);
- :func:`section_span`, :func:`section_spans`, :func:`section_bytes`: sections by name
  (:mod:`~wheels.elf.reader`);
- :func:`build_id_span`: where the GNU build-id lies (:mod:`~wheels.elf.notes`);
- :func:`to_record`, :func:`from_record`: :class:`ElfInfo` for the audit cache
  (:mod:`~wheels.elf.records`); :class:`HostLibraries`: this host's libraries
  (:mod:`~wheels.elf.hostlibs`).

Given a path, :func:`dynamic`, :func:`defined_functions`, :func:`section_span`,
:func:`section_bytes` and :func:`build_id_span` read only the ranges the headers point to.
"""

from typing import TYPE_CHECKING

from wheels.elf.decode import looks_like_elf, read_elf, read_elf_file
from wheels.elf.dynamic import Dynamic, dynamic
from wheels.elf.hostlibs import HostLibraries
from wheels.elf.info import ElfInfo, VersionNeed
from wheels.elf.notes import build_id_span
from wheels.elf.reader import (
    ELF_MAGIC,
    Chunks,
    ElfError,
    section_bytes,
    section_span,
    section_spans,
)
from wheels.elf.records import from_record, to_record
from wheels.elf.symbols import defined_functions

if TYPE_CHECKING:
    from wheels.elf.reader import ByteSource

__all__ = [
    "ELF_MAGIC",
    "ByteSource",
    "Chunks",
    "Dynamic",
    "ElfError",
    "ElfInfo",
    "HostLibraries",
    "VersionNeed",
    "build_id_span",
    "defined_functions",
    "dynamic",
    "from_record",
    "looks_like_elf",
    "read_elf",
    "read_elf_file",
    "section_bytes",
    "section_span",
    "section_spans",
    "to_record",
]
