"""The zip's central directory: its entries, read without :mod:`zipfile` when the archive is of
the plain kind nearly every wheel is, and by :mod:`zipfile` when it is not.

``zipfile.ZipFile`` builds a ``ZipInfo`` per entry (date, extra fields, name checks): 45-60 ms
for torch's 12,248 entries. Here the entries of an archive with no zip64 record, nothing before
its first member and clean extra fields are read with one ``struct`` call each, into
:class:`Entry` rows with the same attribute names and values as ``zipfile`` gives. Anything else
(zip64, a prefixed or spanned archive, an odd name, a field that does not fit) goes to
``zipfile``, so that what it accepts and what it rejects, with its message, stand as they are.
"""

from __future__ import annotations

import os
import struct
import zipfile

END = struct.Struct("<4s4H2LH")  # the end of central directory record
# One central directory entry: its signature, the version it needs, flags, method, CRC-32, sizes,
# the lengths of its name, extra field and comment, attributes and offset (zipfile reads the rest).
CENTRAL = struct.Struct("<4s2xBxHH4x3L3H4x2L")
ZIP64 = 0xFFFFFFFF  # a size or offset that only a zip64 extra field gives
STORED, DEFLATED = 0, 8  # the compression methods wheels use (zipfile.ZIP_STORED, ZIP_DEFLATED)
_LOCATOR = b"PK\x06\x07"  # the zip64 end of central directory locator, just before the end record
_MAX_EXTRACT_VERSION = 63  # zipfile refuses entries that need a later version


class NotAZip(Exception):
    """The file is not a zip archive this audit can read; the message says why."""


class Entry:
    """One central directory entry, with the ``zipfile.ZipInfo`` attributes the audit reads."""

    __slots__ = (
        "CRC",
        "compress_size",
        "compress_type",
        "external_attr",
        "file_size",
        "filename",
        "flag_bits",
        "header_offset",
        "orig_filename",
        "raw_name",
    )

    def __init__(
        self,
        filename: str,
        raw_name: bytes,
        flag_bits: int,
        compress_type: int,
        crc: int,
        compress_size: int,
        file_size: int,
        header_offset: int,
        external_attr: int,
    ) -> None:
        self.filename = self.orig_filename = filename
        self.raw_name = raw_name  # the name's bytes in the archive
        self.flag_bits, self.compress_type, self.CRC = flag_bits, compress_type, crc
        self.compress_size, self.file_size = compress_size, file_size
        self.header_offset, self.external_attr = header_offset, external_attr

    def __repr__(self) -> str:
        return f"Entry({self.filename!r}, {self.file_size} bytes)"


def read_directory(path: str) -> list[Entry]:
    """Every entry of the archive at ``path``, in the order of its central directory (the order of
    ``ZipFile.infolist()``). Raises :class:`NotAZip` when it is not a readable zip archive, and
    OSError when it cannot be read."""
    with open(path, "rb") as fh:
        found = plain_directory(fh.fileno())
    if found is not None:
        entries = _entries(found[0])
        if entries is not None:
            return entries
    return _by_zipfile(path)


def plain_directory(fd: int) -> tuple[bytes, int] | None:
    """The central directory of a plain archive, and its entry count from the end record; None
    for any other archive (zip64, spanned, with bytes before its first member, or not a zip)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    tail_at = max(0, size - END.size - 0xFFFF)
    tail = os.pread(fd, size - tail_at, tail_at)
    if (
        len(tail) >= END.size
        and tail[-END.size : -END.size + 4] == b"PK\x05\x06"
        and not any(tail[-2:])
    ):
        end = len(tail) - END.size  # no comment: zipfile looks here first
    else:
        end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) - end < END.size or (end < 20 and tail_at > 0):
        return None
    _, disk, cd_disk, here, total, cd_size, cd_offset, _ = END.unpack_from(tail, end)
    zip64 = end >= 20 and tail[end - 20 : end - 16] == _LOCATOR
    plain = disk == cd_disk == 0 and here == total and not zip64
    if not plain or cd_offset + cd_size != tail_at + end:
        return None
    directory = tail[end - cd_size : end] if cd_size <= end else os.pread(fd, cd_size, cd_offset)
    return (directory, total) if len(directory) == cd_size else None


def _entries(directory: bytes) -> list[Entry] | None:
    """The entries, as zipfile reads them; None when one is not plainly readable here."""
    out: list[Entry] = []
    pos, size, unpack, head = 0, len(directory), CENTRAL.unpack_from, CENTRAL.size
    try:
        while pos < size:
            (magic, version, flags, method, crc, compressed, inflated, name_len, extra_len,
             comment_len, attrs, offset) = unpack(directory, pos)  # fmt: skip
            start = pos + head
            pos = start + name_len + extra_len + comment_len
            if (
                magic != b"PK\x01\x02"
                or version > _MAX_EXTRACT_VERSION
                or pos > size
                or ZIP64 in (compressed, inflated, offset)
                or (extra_len and not _clean_extra(directory, start + name_len, extra_len))
            ):
                return None
            raw = directory[start : start + name_len]
            if raw.isascii():  # the same in both encodings, without cp437's Python codec
                name = raw.decode("ascii")
            else:
                name = raw.decode("utf-8" if flags & 0x800 else "cp437")
            if "\0" in name:
                return None
            out.append(Entry(name, raw, flags, method, crc, compressed, inflated, offset, attrs))
    except (struct.error, UnicodeDecodeError):
        return None
    return out


def _clean_extra(directory: bytes, start: int, length: int) -> bool:
    """Do the extra fields fit, none of them zip64 (whose values zipfile reads)?"""
    end = start + length
    while end - start >= 4:
        kind = directory[start] | directory[start + 1] << 8
        field = directory[start + 2] | directory[start + 3] << 8
        if kind == 1 or start + 4 + field > end:
            return False
        start += 4 + field
    return True


def _by_zipfile(path: str) -> list[Entry]:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        ValueError,
        EOFError,
        OverflowError,
        UnicodeDecodeError,
        NotImplementedError,
        IndexError,
        KeyError,
    ) as exc:
        raise NotAZip(str(exc)) from None
    return [_entry(i) for i in infos]


def _entry(info: zipfile.ZipInfo) -> Entry:
    entry = Entry(
        info.filename,
        _raw_name(info),
        info.flag_bits,
        info.compress_type,
        info.CRC,
        info.compress_size,
        info.file_size,
        info.header_offset,
        info.external_attr,
    )
    entry.orig_filename = info.orig_filename  # (before the name's first NUL, where it has one)
    return entry


def _raw_name(info: zipfile.ZipInfo) -> bytes:
    name = info.orig_filename
    if name.isascii():
        return name.encode("ascii")
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    return name.encode(encoding, errors="surrogateescape")
