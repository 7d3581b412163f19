"""An entry's install manifest: every file, link and directory of its prefix, with its type,
mode and SHA-256, written beside ``record.json`` before the entry is renamed into the store.

SHA-256, not BLAKE2: on this project's build machines hashlib's SHA-256 (OpenSSL, SHA-NI) read
490 MB/s against BLAKE2b's 201 MB/s and BLAKE2s's 142 MB/s (64 MiB in 1 MiB steps, best of 3),
and the registry speaks SHA-256 already.

:func:`compare` checks a tree against a manifest and says what is missing, extra or changed,
file by file; an entry made before manifests existed has none and is *unverifiable*, which is
not the same as broken.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from builder.core.fs import atomic_write

MANIFEST = "manifest.json"
ALGORITHM = "sha256"
FORMAT = 1
CHUNK = 1 << 20

Kind = Literal["file", "link", "dir"]


@dataclass(frozen=True, slots=True)
class Item:
    """One path of a prefix: a file (mode, size, digest), a link (its target) or a directory."""

    kind: Kind
    mode: int = 0
    size: int = 0
    digest: str = ""
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.kind == "link":
            return {"type": "link", "target": self.target}
        if self.kind == "dir":
            return {"type": "dir", "mode": f"{self.mode:04o}"}
        return {
            "type": "file",
            "mode": f"{self.mode:04o}",
            "size": self.size,
            "sha256": self.digest,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Item:
        kind = data["type"]
        if kind == "link":
            return cls("link", target=str(data["target"]))
        if kind == "dir":
            return cls("dir", mode=int(data["mode"], 8))
        if kind == "file":
            return cls("file", int(data["mode"], 8), int(data["size"]), str(data["sha256"]))
        raise ValueError(f"unknown type {kind!r}")

    def describe(self) -> str:
        if self.kind == "link":
            return f"a link to {self.target}"
        if self.kind == "dir":
            return f"a directory, mode {self.mode:04o}"
        return f"a file of {self.size} bytes, mode {self.mode:04o}, sha256 {self.digest[:12]}"


Items = dict[str, Item]


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def item_of(path: Path) -> Item | None:
    """What ``path`` is now (links not followed); None for anything else (a socket, a fifo)."""
    st = path.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return Item("link", target=str(path.readlink()))
    if stat.S_ISDIR(st.st_mode):
        return Item("dir", mode=mode)
    if stat.S_ISREG(st.st_mode):
        return Item("file", mode, st.st_size, file_digest(path))
    return None


def walk(prefix: Path) -> Iterator[Path]:
    """Every path under ``prefix`` (links not followed), sorted, a directory before its contents."""
    for entry in sorted(os.scandir(prefix), key=lambda e: e.name):
        path = Path(entry.path)
        yield path
        if entry.is_dir(follow_symlinks=False):
            yield from walk(path)


def scan(prefix: Path) -> Items:
    """The manifest of the tree at ``prefix`` as it is now."""
    out: Items = {}
    for path in walk(prefix):
        item = item_of(path)
        out[path.relative_to(prefix).as_posix()] = item or Item("file", digest="(not a file)")
    return out


# --- the document -------------------------------------------------------------------------------


def document(items: Items) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "algorithm": ALGORITHM,
        "paths": {name: item.to_json() for name, item in sorted(items.items())},
    }


def encode(items: Items) -> bytes:
    return json.dumps(document(items), sort_keys=True, separators=(",", ":")).encode()


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse(doc: Mapping[str, Any]) -> Items:
    """The items of a manifest document; ValueError when it is none this tool reads."""
    if doc.get("format") != FORMAT or doc.get("algorithm") != ALGORITHM:
        raise ValueError(f"manifest format {doc.get('format')!r}/{doc.get('algorithm')!r}")
    paths = doc.get("paths")
    if not isinstance(paths, dict):
        raise ValueError("manifest without paths")
    try:
        return {str(name): Item.from_json(data) for name, data in paths.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"manifest entry unreadable ({exc})") from None


def write(entry: Path, items: Items) -> dict[str, Any]:
    """Write ``entry/manifest.json`` durably; returns what the record says of it."""
    data = encode(items)
    atomic_write(entry / MANIFEST, data.decode(), durable=True)
    return summary(data, items)


def summary(data: bytes, items: Items) -> dict[str, Any]:
    files = sum(1 for i in items.values() if i.kind == "file")
    return {"algorithm": ALGORITHM, "digest": digest_of(data), "paths": len(items), "files": files}


def read(entry: Path, said: Mapping[str, Any] | None) -> Items | None:
    """The manifest of ``entry``, checked against the digest its record gives (``said``);
    None when the entry has none (made before manifests). ValueError when it is damaged."""
    path = entry / MANIFEST
    if said is None and not path.exists():
        return None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"its {MANIFEST} is missing") from None
    if said is not None and digest_of(data) != said.get("digest"):
        raise ValueError(f"its {MANIFEST} does not hash to the digest its record gives")
    try:
        doc = json.loads(data)
    except ValueError:
        raise ValueError(f"its {MANIFEST} is not JSON") from None
    return parse(doc)


# --- comparing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    path: str  # relative to the prefix
    what: Literal["missing", "extra", "changed"]
    detail: str

    def line(self) -> str:
        return f"{self.what} {self.path}: {self.detail}"

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "what": self.what, "detail": self.detail}


def differ(expected: Item, found: Item) -> str | None:
    """How ``found`` differs from ``expected``; None when it does not."""
    if expected.kind != found.kind:
        return f"was {expected.describe()}, is {found.describe()}"
    if expected.kind == "link":
        return (
            None
            if expected.target == found.target
            else f"link to {found.target}, was {expected.target}"
        )
    if expected.mode != found.mode:
        return f"mode {found.mode:04o}, was {expected.mode:04o}"
    if expected.kind == "file" and (expected.size, expected.digest) != (found.size, found.digest):
        return (
            f"content changed ({found.size} bytes, sha256 {found.digest[:12]}; was "
            f"{expected.size} bytes, {expected.digest[:12]})"
        )
    return None


def compare(prefix: Path, expected: Items) -> tuple[Difference, ...]:
    """What differs between the tree at ``prefix`` and ``expected``, in path order."""
    found = scan(prefix) if prefix.is_dir() else {}
    out: list[Difference] = []
    for name in sorted(expected.keys() | found.keys()):
        want, got = expected.get(name), found.get(name)
        if got is None and want is not None:
            out.append(Difference(name, "missing", f"{want.describe()} is gone"))
        elif want is None and got is not None:
            out.append(Difference(name, "extra", f"{got.describe()}, not in the manifest"))
        elif want is not None and got is not None and (why := differ(want, got)):
            out.append(Difference(name, "changed", why))
    return tuple(out)
