"""What a cache backend does (an OCI registry, a directory), and the two ways a cache fails.

:class:`Unavailable`: the cache cannot be used now (down, slow, refusing, no credentials): a
warning, then a local build (an error under ``--cache-required``). :class:`Refused`: an entry
was read but is not accepted (a wrong digest, a bad or missing signature, a malformed artifact):
nothing of it enters the store, and the component is built locally.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from builder.core.errors import BuildError

MAX_MANIFEST = 4 * 1024 * 1024  # the distribution spec's limit for manifests
MAX_CONFIG = 16 * 1024 * 1024


class Unavailable(BuildError):
    """The cache could not be reached or refused the request."""


class Refused(BuildError):
    """An entry that is not accepted; the message says which and why."""


class Remote(Protocol):
    """A place holding artifacts: blobs by digest, manifests by tag."""

    @property
    def display(self) -> str:
        """Where it is, without credentials."""
        ...

    def manifest(self, tag: str) -> tuple[bytes, str] | None:
        """The manifest ``tag`` names and its digest; None when there is none."""
        ...

    def has_manifest(self, tag: str) -> bool: ...

    def blob(self, digest: str, limit: int) -> Iterator[bytes]:
        """The blob's bytes in chunks, at most ``limit`` of them (the caller checks the digest)."""
        ...

    def has_blob(self, digest: str) -> bool: ...

    def put_blob(self, digest: str, source: Path | bytes) -> None: ...

    def put_manifest(self, tag: str, data: bytes, media_type: str) -> None:
        """Make ``tag`` name ``data``: written last, so a reader never sees half an entry."""
        ...
