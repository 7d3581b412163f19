"""The archive: zip hygiene (names, links, duplicates), the dist-info directory with its WHEEL,
METADATA and RECORD, and every member against its RECORD row."""

from __future__ import annotations

import csv
import os
import posixpath
import stat
from dataclasses import dataclass, field, replace
from email.parser import HeaderParser
from typing import TYPE_CHECKING

from wheels.audit.directory import Entry, NotAZip, read_directory
from wheels.audit.findings import Findings
from wheels.audit.members import MemberScan, content_of, inflate
from wheels.audit.raw import MemberError, read_raw, task_for
from wheels.audit.requires import InvalidRequires, read_requires
from wheels.filename import (
    InvalidWheelName,
    canonicalize_name,
    parse_wheel_filename,
    same_version,
)
from wheels.inflate import crc32
from wheels.naming import escaped_name, split_variant
from wheels.policy.wheel_abi import pep600

if TYPE_CHECKING:
    from collections.abc import Sequence

    from wheels.audit.requires import Requires

HASHES = ("sha256", "sha384", "sha512")


@dataclass
class Archive:
    """The zip's entries and what its file name and dist-info say, filled in as they are read."""

    path: str
    infos: list[Entry]
    names: dict[str, int]  # each name's entry (the last, where a name appears twice)
    distribution: str | None = None
    version: str | None = None  # normalized
    file_tags: tuple[str, ...] = ()
    dist_info: str | None = None
    data_dir: str | None = None
    wheel_tags: tuple[str, ...] = ()
    root_is_purelib: bool = False
    requires: list[Requires] = field(default_factory=list)
    record: dict[str, tuple[str, str]] = field(default_factory=dict)
    record_order: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The wheel's file name."""
        return os.path.basename(self.path)


def open_archive(path: str, f: Findings) -> Archive | None:
    """The wheel as a zip archive; None (with a finding) when it is not one."""
    if not os.path.exists(path):
        f.violation("missing", None, "no such file")
        return None
    if not os.path.isfile(path):
        f.violation("not-a-file", None, "not a regular file")
        return None
    try:
        infos = read_directory(path)
    except (NotAZip, OSError) as exc:
        f.violation("not-a-zip", None, f"not a readable zip archive: {exc}")
        return None
    return Archive(path, infos, {info.filename: i for i, info in enumerate(infos)})


def read_member(archive: Archive, name: str) -> bytes | bytearray:
    """The content of the member ``name``, as ``ZipFile.read`` gives it: checked against its
    CRC-32. Raises KeyError when there is no such member, MemberError when it cannot be read;
    for members the caller knows to be small (it is held whole)."""
    index = archive.names[name]
    info = archive.infos[index]
    task = task_for(index, info, "sha256")
    try:
        with open(archive.path, "rb") as fh:
            data = content_of(task, read_raw(fh.fileno(), task), archive.path)
    except OSError as exc:
        raise MemberError(f"cannot read the wheel: {exc}") from None
    if crc32(data) != info.CRC:
        raise MemberError("its content does not match its CRC-32")
    return data


def check_names(archive: Archive, f: Findings) -> None:
    """Member names and modes: absolute, climbing, odd, duplicate, links, special files."""
    counts: dict[str, int] = {}
    for info in archive.infos:
        counts[info.filename] = counts.get(info.filename, 0) + 1
    reported: set[str] = set()
    for info in archive.infos:
        name = info.filename
        parts = name.split("/")
        if name.startswith("/") or has_drive(name):
            f.violation("absolute-name", name, "member name is an absolute path")
        if ".." in parts:
            f.violation("dotdot-name", name, "member name climbs out of the install root ('..')")
        if "\\" in name or "\0" in info.orig_filename:
            f.violation("odd-name", name, "member name holds a backslash or a NUL byte")
        if not name:
            f.violation("odd-name", None, "a member has an empty name")
        if counts[name] > 1 and name not in reported:
            f.violation("duplicate", name, f"member appears {counts[name]} times in the archive")
            reported.add(name)
        # normpath changes only names with an empty, "." or ".." part (12,000 names in torch)
        squashed = name
        if "" in parts[:-1] or "." in parts or ".." in parts:
            squashed = posixpath.normpath(name) + ("/" if name.endswith("/") else "")
        if squashed != name and squashed in counts:
            f.violation("duplicate", name, f"member names the same file as {squashed!r}")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            f.violation("symlink", name, "member is a symbolic link")
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            f.violation("special-file", name, f"member is a special file (mode {oct(mode)})")


def is_member_file(info: Entry) -> bool:
    """A member with content of its own: not a directory, not a link."""
    mode = info.external_attr >> 16
    return not _is_dir(info) and not stat.S_ISLNK(mode)


def _is_dir(info: Entry) -> bool:
    """ZipInfo.is_dir, which fails on an empty name."""
    return info.filename.endswith("/")


def read_metadata(archive: Archive, f: Findings) -> None:
    """The file name, then the dist-info directory's WHEEL, METADATA and RECORD."""
    try:
        name, version, _build, tags = parse_wheel_filename(split_variant(archive.name)[0])
    except InvalidWheelName as exc:
        f.violation("bad-filename", None, f"not a wheel file name: {exc}")
        name, version, tags = None, None, set()
    archive.distribution, archive.version = name, version
    archive.file_tags = tuple(sorted({platform for _, _, platform in tags}))
    tops = sorted({i.filename.split("/", 1)[0] for i in archive.infos if "/" in i.filename})
    dist_infos = [t for t in tops if t.endswith(".dist-info")]
    if not dist_infos:
        f.violation("no-dist-info", None, "no .dist-info directory: this zip is not a wheel")
        return
    matching = [d for d in dist_infos if name and version and _names(d, name, version)]
    archive.dist_info = (matching or dist_infos)[0]
    if name and version and not matching:
        f.violation(
            "dist-info-name",
            archive.dist_info,
            f"the .dist-info directory should be {escaped_name(name)}-{version}.dist-info",
        )
    if len(dist_infos) > 1:
        f.violation(
            "dist-info-name", None, "several .dist-info directories: " + ", ".join(dist_infos)
        )
    archive.data_dir = archive.dist_info[: -len(".dist-info")] + ".data"
    _read_wheel_file(archive, _small(archive, f"{archive.dist_info}/WHEEL", f), f)
    _read_metadata_file(archive, _small(archive, f"{archive.dist_info}/METADATA", f), f)
    _read_record(archive, _small(archive, f"{archive.dist_info}/RECORD", f), f)


def _names(dist_info: str, name: str, version: str) -> bool:
    """Does ``NAME-VERSION.dist-info`` name this distribution (as pip compares them)?"""
    stem, _, raw_version = dist_info[: -len(".dist-info")].rpartition("-")
    return canonicalize_name(stem) == name and same_version(raw_version, version)


def _small(archive: Archive, member: str, f: Findings) -> str | None:
    index = archive.names.get(member)
    if index is None:
        f.violation("missing-metadata", member, "missing")
        return None
    size = archive.infos[index].file_size
    if size > 64 << 20:
        f.violation("metadata-too-large", member, f"{size} bytes")
        return None
    try:
        return read_member(archive, member).decode("utf-8")
    except (MemberError, UnicodeDecodeError) as exc:
        f.violation("unreadable-metadata", member, f"cannot read: {exc}")
        return None


def record_rows(text: str) -> list[list[str]]:
    """RECORD's rows as ``csv.reader`` reads them; its errors raised as ValueError."""
    try:
        return list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise ValueError(str(exc)) from None


def has_drive(name: str) -> bool:
    """Does ``name`` start with a drive letter, ``^[A-Za-z]:``?"""
    return len(name) > 1 and name[1] == ":" and name[0].isascii() and name[0].isalpha()


class Headers:
    """The header block of WHEEL or METADATA, as email's parser (compat32) reads it."""

    def __init__(self, text: str) -> None:
        self._message = HeaderParser().parsestr(text)  # (policy compat32, the default)

    def get(self, name: str) -> str | None:
        value = self._message.get(name)
        return None if value is None else str(value)

    def get_all(self, name: str) -> list[str]:
        return [str(v) for v in self._message.get_all(name) or []]


def _read_wheel_file(archive: Archive, text: str | None, f: Findings) -> None:
    if text is None:
        return
    msg = Headers(text)
    member = f"{archive.dist_info}/WHEEL"
    if not (msg.get("Wheel-Version") or "").startswith("1."):
        f.violation(
            "wheel-version", member, f"Wheel-Version {msg.get('Wheel-Version')!r}, expected 1.x"
        )
    archive.root_is_purelib = (msg.get("Root-Is-Purelib") or "").strip().lower() == "true"
    archive.wheel_tags = _tag_platforms(msg.get_all("Tag"), member, f)
    if archive.file_tags and _platforms(archive.wheel_tags) != _platforms(archive.file_tags):
        # A warning: installers pick and install a wheel by its file name, whose platform the
        # ELF files are held to (platform-tag); no installer acts on the Tag lines.
        f.warning(
            "wheel-tag",
            member,
            "Tag lines ({}) disagree with the file name ({}): pip and other installers go by "
            "the file name, to which the ELF files are held; the Tag lines are stale metadata "
            "that no installer reads (stale-metadata rule, docs/audit-verdicts.md)".format(
                ", ".join(archive.wheel_tags) or "none", ", ".join(archive.file_tags)
            ),
        )


def _platforms(tags: Sequence[str]) -> set[object]:
    """The platforms ``tags`` name, a legacy alias as its PEP 600 name: WHEEL's
    ``manylinux2014_x86_64`` and ``manylinux_2_17_x86_64`` beside a file name's
    ``manylinux2014_x86_64`` alone (xgboost-cpu 2.1.3) name one platform twice."""
    return {pep600(tag) or tag for tag in tags}


def _tag_platforms(lines: Sequence[str], member: str, f: Findings) -> tuple[str, ...]:
    """The platforms of WHEEL's ``Tag`` lines, each line expanded as a file name's tag set is
    (maturin writes compressed sets there, PyO3/maturin#2761: a warning, not a wrong tag)."""
    platforms: set[str] = set()
    for line in lines:
        pieces = line.strip().split("-")
        if len(pieces) != 3 or not all(pieces) or not all(all(p.split(".")) for p in pieces):
            f.violation("wheel-tag", member, f"malformed Tag {line!r}")
            continue
        expanded = set(pieces[2].split("."))
        if any("." in p for p in pieces):
            f.warning(
                "wheel-tag",
                member,
                f"Tag {line.strip()!r} is a compressed tag set; the wheel specification wants "
                "one expanded tag per Tag line",
            )
        platforms |= expanded
    return tuple(sorted(platforms))


def _read_metadata_file(archive: Archive, text: str | None, f: Findings) -> None:
    if text is None:
        return
    member = f"{archive.dist_info}/METADATA"
    msg = Headers(text)
    name = msg.get("Name")
    if archive.distribution and (not name or canonicalize_name(name) != archive.distribution):
        f.warning("metadata-name", member, f"Name {name!r} differs from the file name")
    values = msg.get_all("Requires-Dist")
    if not values:
        return
    for value in values:
        try:
            archive.requires.append(read_requires(value))
        except InvalidRequires as exc:
            f.violation("requires-dist", member, f"invalid Requires-Dist {value!r}: {exc}")


def _read_record(archive: Archive, text: str | None, f: Findings) -> None:
    if text is None:
        return
    member = f"{archive.dist_info}/RECORD"
    try:
        rows = record_rows(text)
    except ValueError as exc:
        f.violation("record", member, f"not CSV: {exc}")
        return
    for number, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != 3:
            f.violation("record", member, f"row {number} has {len(row)} fields, not 3")
            continue
        path, digest, size = row
        if path in archive.record:
            f.violation("record", member, f"row {number} lists {path} a second time")
        archive.record[path] = (digest, size)
        archive.record_order.append(path)


def rehash(archive: Archive, path: str, scans: list[MemberScan]) -> list[MemberScan]:
    """Members hashed with sha256 whose RECORD rows name another accepted algorithm."""
    if all(digest.startswith("sha256=") for digest, _ in archive.record.values()):
        return scans  # (nearly every wheel: no member to hash again)
    out = []
    for scan in scans:
        algo = _record_algo(archive, scan.name)
        if algo == scan.algo or scan.read_error:
            out.append(scan)
            continue
        task = task_for(scan.index, archive.infos[scan.index], algo)
        with open(path, "rb") as fh:
            try:
                _, digest = inflate(task, read_raw(fh.fileno(), task), path, False)
            except MemberError as exc:
                out.append(replace(scan, read_error=str(exc)))
                continue
        out.append(replace(scan, digest=digest, algo=algo))
    return out


def _record_algo(archive: Archive, name: str) -> str:
    algo = archive.record.get(name, ("", ""))[0].partition("=")[0]
    return algo if algo in HASHES else "sha256"


def check_record(archive: Archive, scans: Sequence[MemberScan], f: Findings) -> None:
    """Every member against its RECORD row, and every row against a member."""
    if archive.dist_info is None or not archive.record:
        return
    own = f"{archive.dist_info}/RECORD"
    unsigned = {own, f"{own}.jws", f"{own}.p7s"}
    present = {i.filename for i in archive.infos if not _is_dir(i)}
    for name in sorted(present - set(archive.record) - unsigned):
        f.violation("record", name, "not listed in RECORD")
    for name in sorted(set(archive.record) - present):
        f.violation("record", name, "listed in RECORD but not in the wheel")
    for scan in scans:
        if scan.name in unsigned or scan.name not in archive.record:
            continue
        digest, size = archive.record[scan.name]
        algo, _, value = digest.partition("=")
        if not digest:
            f.violation("record", scan.name, "RECORD gives no hash")
        elif algo not in HASHES:
            f.violation(
                "record", scan.name, f"RECORD uses hash {algo!r}; sha256 or stronger is required"
            )
        elif scan.digest is not None and value != scan.digest:
            f.violation("record-hash", scan.name, f"content does not match its RECORD {algo}")
        if scan.size is not None and size != str(scan.size):
            f.violation(
                "record-size",
                scan.name,
                f"RECORD says {size or 'no'} bytes, the member has {scan.size}",
            )


def install_path(archive: Archive, name: str) -> str | None:
    """Where a member lands relative to site-packages; None for scripts, headers and data."""
    if archive.data_dir and name.startswith(archive.data_dir + "/"):
        _, category, rest = [*name.split("/", 2), "", ""][:3]
        return rest if category in ("purelib", "platlib") and rest else None
    return name


def requirements(archive: Archive) -> dict[str, list[Requires]]:
    """The Requires-Dist entries by canonical distribution name."""
    out: dict[str, list[Requires]] = {}
    for req in archive.requires:
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out
