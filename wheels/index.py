"""A static package index per vendor label: PEP 503 HTML and PEP 691 JSON, with PEP 658/714
metadata files, in a tree that later releases merge into.

The tree, under a root the user names::

    ROOT/<label>/simple/index.html                 the projects (PEP 503)
    ROOT/<label>/simple/index.json                 the same (PEP 691, api-version 1.1)
    ROOT/<label>/simple/<project>/index.html       the project's files, hashes in the fragment
    ROOT/<label>/simple/<project>/index.json
    ROOT/<label>/simple/<project>/<wheel>          the wheel
    ROOT/<label>/simple/<project>/<wheel>.metadata its core metadata (PEP 658)

``<label>`` is the vendor part of the wheel's local version (``cpu``, ``cu130``), the part
:mod:`wheels.naming` puts first. A static server answers a directory with its ``index.html``,
which is what pip asks for when the server ignores its Accept header; ``index.json`` is there
for a server that maps ``Accept: application/vnd.pypi.simple.v1+json`` to it.

A file once published is never rewritten: a wheel (or metadata file) whose name is already in
the tree must have the same bytes, or the whole merge is refused before anything is written.
The index pages are made again from the files in the tree each time.
"""

from __future__ import annotations

import email.parser
import html
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from hashlib import sha256 as _sha256
from pathlib import Path
from urllib.parse import quote

from packaging.version import Version

from builder.core.digest import file_digest
from builder.core.errors import UsageError
from wheels.filename import InvalidWheelName, canonicalize_name, parse_wheel_filename
from wheels.naming import split_variant

SIMPLE = "simple"
API_VERSION = "1.1"  # PEP 700: sizes and the versions list
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_PAGE = "index.html"
JSON_PAGE = "index.json"
METADATA_SUFFIX = ".metadata"  # PEP 658: the core metadata beside the distribution


@dataclass(frozen=True, kw_only=True)
class IndexFile:
    """One distribution file as an index page lists it."""

    filename: str
    version: str
    sha256: str
    size: int
    requires_python: str | None
    metadata_sha256: str | None  # of the PEP 658 metadata file; None: no metadata file


@dataclass(frozen=True, kw_only=True)
class Placement:
    """A file to publish: where in the tree it goes, and its bytes (or the file holding them:
    a wheel is copied, never read whole into memory)."""

    target: Path
    data: bytes = b""
    source: Path | None = None

    def digest(self) -> bytes:
        return file_digest(self.source) if self.source is not None else _sha256(self.data).digest()


# --- names ----------------------------------------------------------------------------------


def parse_wheel(filename: str) -> tuple[str, str]:
    """A wheel file name's (normalized project name, version); refused when it is not a plain
    wheel name (a PEP 825 variant wheel has no place in a PEP 503 index)."""
    _, variant = split_variant(filename)
    if variant is not None:
        raise UsageError(f"{filename} is a variant wheel: a simple index lists plain wheels only")
    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelName as exc:
        raise UsageError(f"{filename} is not a wheel file name: {exc}") from None
    return canonicalize_name(name), str(version)


def vendor_label(filename: str) -> str:
    """The index a wheel belongs in: the first part of its local version (``0.1.0+cu130`` and
    ``0.1.0+cu130.torch2.11`` go to ``cu130``, ``0.1.0+cpu`` to ``cpu``)."""
    _, version = parse_wheel(filename)
    local = version.partition("+")[2]
    if not local:
        raise UsageError(
            f"{filename} has no local version, so it names no vendor index",
            hint="the stack's wheels carry the vendor's local version (0.1.0+cpu, 0.1.0+cu130)",
        )
    return local.split(".")[0]


# --- metadata -------------------------------------------------------------------------------


def core_metadata(wheel: Path) -> bytes:
    """The wheel's ``.dist-info/METADATA``, byte for byte (PEP 658 serves it as it is)."""
    with zipfile.ZipFile(wheel) as zf:
        names = [
            n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            raise UsageError(f"{wheel.name} has {len(names)} .dist-info/METADATA files, not one")
        return zf.read(names[0])


def requires_python(metadata: bytes) -> str | None:
    """The ``Requires-Python`` of core metadata, or None."""
    parsed = email.parser.BytesHeaderParser().parsebytes(metadata)
    value = parsed.get("Requires-Python")
    return str(value).strip() if value else None


# --- pages (pure) ---------------------------------------------------------------------------


def project_html(project: str, files: Sequence[IndexFile]) -> str:
    """A PEP 503 project page: one anchor per file, its sha256 in the URL's fragment, its
    Requires-Python and metadata hash (PEP 658 and PEP 714's name for it) as attributes."""
    anchors = []
    for f in files:
        attrs = [f'href="{html.escape(quote(f.filename))}#sha256={f.sha256}"']
        if f.requires_python:
            attrs.append(f'data-requires-python="{html.escape(f.requires_python)}"')
        if f.metadata_sha256:
            attrs.append(f'data-dist-info-metadata="sha256={f.metadata_sha256}"')
            attrs.append(f'data-core-metadata="sha256={f.metadata_sha256}"')
        anchors.append(f"    <a {' '.join(attrs)}>{html.escape(f.filename)}</a><br>")
    return page(f"Links for {project}", anchors)


def root_html(projects: Iterable[str]) -> str:
    """The PEP 503 root page: one anchor per project, to its directory."""
    anchors = [
        f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br>' for p in sorted(projects)
    ]
    return page("Simple index", anchors)


def page(title: str, lines: Sequence[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "  <head>",
            f'    <meta name="pypi:repository-version" content="{API_VERSION}">',
            f"    <title>{html.escape(title)}</title>",
            "  </head>",
            "  <body>",
            f"    <h1>{html.escape(title)}</h1>",
            *lines,
            "  </body>",
            "</html>",
            "",
        ]
    )


def project_json(project: str, files: Sequence[IndexFile]) -> str:
    """A PEP 691 project page (api-version 1.1: sizes and versions, PEP 700)."""

    entries = []
    for f in files:
        entry: dict[str, object] = {
            "filename": f.filename,
            "url": quote(f.filename),  # relative to the page, as PEP 691 allows
            "hashes": {"sha256": f.sha256},
            "size": f.size,
        }
        if f.requires_python:
            entry["requires-python"] = f.requires_python
        if f.metadata_sha256:
            entry["core-metadata"] = {"sha256": f.metadata_sha256}
            entry["dist-info-metadata"] = {"sha256": f.metadata_sha256}
        entries.append(entry)
    versions = sorted({f.version for f in files}, key=Version)
    data: dict[str, object] = {"meta": {"api-version": API_VERSION}, "name": project}
    data.update(versions=versions, files=entries)
    return json.dumps(data, indent=2) + "\n"


def root_json(projects: Iterable[str]) -> str:
    data = {
        "meta": {"api-version": API_VERSION},
        "projects": [{"name": p} for p in sorted(projects)],
    }
    return json.dumps(data, indent=2) + "\n"


# --- the tree -------------------------------------------------------------------------------


def simple_dir(root: Path, label: str) -> Path:
    return root / label / SIMPLE


def placements(root: Path, wheel: Path) -> list[Placement]:
    """Where a wheel and its metadata file go in the tree under ``root``."""
    project, _ = parse_wheel(wheel.name)
    directory = simple_dir(root, vendor_label(wheel.name)) / project
    return [
        Placement(target=directory / wheel.name, source=wheel),
        Placement(target=directory / (wheel.name + METADATA_SUFFIX), data=core_metadata(wheel)),
    ]


def conflicts(wanted: Sequence[Placement]) -> list[str]:
    """The files already published under a wanted name with other bytes."""
    return [
        str(p.target) for p in wanted if p.target.exists() and file_digest(p.target) != p.digest()
    ]


def publish_file(placement: Placement) -> bool:
    """Write a new file whole (a temporary file linked into place, which fails rather than
    replace one that appeared meanwhile); False when the same bytes are there already."""
    target = placement.target
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            if placement.source is not None:
                with placement.source.open("rb") as source:
                    shutil.copyfileobj(source, out, 1 << 20)
            else:
                out.write(placement.data)
        temporary.chmod(0o644)
        target.hardlink_to(temporary)
    finally:
        temporary.unlink()
    return True


def replace_page(target: Path, text: str) -> None:
    """An index page, replaced whole (a reader never sees half a page)."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    temporary = Path(name)
    temporary.chmod(0o644)
    temporary.replace(target)


def listed_files(directory: Path) -> list[IndexFile]:
    """The wheels of one project directory, as its pages list them."""
    files = []
    for wheel in sorted(directory.glob("*.whl")):
        _, version = parse_wheel(wheel.name)
        metadata = wheel.with_name(wheel.name + METADATA_SUFFIX)
        meta = metadata.read_bytes() if metadata.is_file() else None
        files.append(
            IndexFile(
                filename=wheel.name,
                version=version,
                sha256=file_digest(wheel).hex(),
                size=wheel.stat().st_size,
                requires_python=requires_python(meta) if meta is not None else None,
                metadata_sha256=file_digest(metadata).hex() if meta is not None else None,
            )
        )
    return files


def write_pages(simple: Path) -> None:
    """Every project page of one label's index, and its root page, made from the tree."""
    projects = sorted(d.name for d in simple.iterdir() if d.is_dir() and any(d.glob("*.whl")))
    for project in projects:
        files = listed_files(simple / project)
        replace_page(simple / project / HTML_PAGE, project_html(project, files))
        replace_page(simple / project / JSON_PAGE, project_json(project, files))
    replace_page(simple / HTML_PAGE, root_html(projects))
    replace_page(simple / JSON_PAGE, root_json(projects))


def add_wheels(root: Path, wheels: Sequence[Path]) -> list[Path]:
    """Merge ``wheels`` into the index tree under ``root``: the new files written, the pages
    of each label touched made again. Refused whole, before any write, when a name already
    published holds other bytes. Returns the files written (none: all were there)."""
    wanted = [p for wheel in wheels for p in placements(root, wheel)]
    clashes = conflicts(wanted)
    if clashes:
        listed = "\n".join(f"  {c}" for c in clashes)
        raise UsageError(
            f"the index under {root} already publishes other files under these names:\n{listed}",
            hint="a published file is never replaced: release under a new version",
        )
    written = [p.target for p in wanted if publish_file(p)]
    for label in sorted({vendor_label(w.name) for w in wheels}):
        write_pages(simple_dir(root, label))
    return written
