"""A cache in a shared directory (``file:///DIR``, e.g. NFS): the registry's artifact on disk.

``DIR/blobs/sha256/<hex>`` holds every blob and manifest, as in an OCI image layout;
``DIR/tags/<tag>`` holds the digest of the manifest a tag names. Each file is written aside and
renamed into place, the tag last: a reader never sees half an entry, and two writers of the same
key both succeed (the last rename wins, and either manifest is whole).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builder.cache.remote import MAX_MANIFEST, Unavailable

CHUNK = 1 << 20


@dataclass(frozen=True)
class FileCache:
    root: Path

    @property
    def display(self) -> str:
        return f"file://{self.root}"

    def _blob(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64 or not hexdigest.isalnum():
            raise Unavailable(f"{self.display}: unsupported digest {digest[:80]}")
        return self.root / "blobs" / "sha256" / hexdigest

    def _tag(self, tag: str) -> Path:
        return self.root / "tags" / tag

    def _check(self) -> None:
        if not self.root.is_dir():
            raise Unavailable(f"{self.display} is unreachable: no such directory")

    def manifest(self, tag: str) -> tuple[bytes, str] | None:
        self._check()
        try:
            digest = self._tag(tag).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Unavailable(f"{self.display}: cannot read tag {tag}: {exc.strerror}") from None
        try:
            with self._blob(digest).open("rb") as f:
                data = f.read(MAX_MANIFEST + 1)
        except FileNotFoundError:
            return None  # a tag whose manifest was removed by hand: no entry
        except OSError as exc:
            raise Unavailable(f"{self.display}: cannot read {digest}: {exc.strerror}") from None
        return data, digest

    def has_manifest(self, tag: str) -> bool:
        self._check()
        return self._tag(tag).is_file()

    def blob(self, digest: str, limit: int) -> Iterator[bytes]:
        self._check()
        got = 0
        try:
            with self._blob(digest).open("rb") as f:
                while chunk := f.read(CHUNK):
                    got += len(chunk)
                    if got > limit:
                        raise Unavailable(
                            f"{self.display}: blob {digest[:19]} is larger than declared"
                        )
                    yield chunk
        except FileNotFoundError:
            raise Unavailable(f"{self.display}: blob {digest[:19]} is missing") from None
        except OSError as exc:
            raise Unavailable(
                f"{self.display}: cannot read {digest[:19]}: {exc.strerror}"
            ) from None

    def has_blob(self, digest: str) -> bool:
        self._check()
        return self._blob(digest).is_file()

    def put_blob(self, digest: str, source: Path | bytes) -> None:
        self._write(self._blob(digest), source)

    def put_manifest(self, tag: str, data: bytes, media_type: str) -> None:
        from builder.cache.artifact import digest_of

        digest = digest_of(data)
        self._write(self._blob(digest), data)
        self._write(self._tag(tag), digest.encode())

    def _write(self, target: Path, source: Path | bytes) -> None:
        self._check()
        tmp = target.parent / f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(source, bytes):
                tmp.write_bytes(source)
            else:
                shutil.copyfile(source, tmp)
            tmp.chmod(0o644)
            tmp.replace(target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise Unavailable(
                f"{self.display}: cannot write {target.name}: {exc.strerror}"
            ) from None
