"""Cache URLs: ``oci://HOST[:PORT]/REPOSITORY`` (``oci+http://`` for a plain-HTTP registry;
loopback hosts are plain HTTP by default, as docker treats them) and ``file:///DIR``.

The list is ``--cache`` (repeatable), else ``$INFINI_STACK_CACHE`` (space- or comma-separated),
else stack.yaml's ``cache:``; caches are tried in order, and ``--push`` writes to the first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from builder.core.errors import UsageError
from builder.core.redact import register_secret, strip_userinfo

CACHE_ENV = "INFINI_STACK_CACHE"
SCHEMES = ("oci", "oci+http", "oci+https", "file")
LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")
# The distribution spec's repository name: lowercase path components.
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_HINT = (
    "a cache is oci://HOST[:PORT]/REPOSITORY (e.g. oci://ghcr.io/org/infini-cache) or file:///DIR"
)


@dataclass(frozen=True)
class CacheURL:
    kind: Literal["oci", "file"]
    display: str  # without credentials: what messages and records say
    host: str = ""  # oci: HOST[:PORT]
    repository: str = ""  # oci: the repository path
    http: bool = False  # oci: plain HTTP instead of HTTPS
    directory: Path | None = None  # file
    username: str | None = None  # user-info given in the URL (discouraged; redacted everywhere)
    password: str | None = None

    @property
    def base(self) -> str:
        """The registry's API root (oci)."""
        return f"{'http' if self.http else 'https'}://{self.host}/v2/{self.repository}"


def parse(text: str) -> CacheURL:
    """A cache URL, or a UsageError that says what is wrong with it."""
    shown = strip_userinfo(text.strip())
    try:
        parts = urlsplit(text.strip())
        port = parts.port  # validates it
    except ValueError as exc:
        raise UsageError(f"bad cache URL {shown}: {exc}", hint=_HINT) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UsageError(f"bad cache URL {shown}: unknown scheme '{scheme}'", hint=_HINT)
    if scheme == "file":
        return _file_url(parts.netloc, parts.path, shown)
    host = parts.hostname or ""
    if not host:
        raise UsageError(f"bad cache URL {shown}: no registry host", hint=_HINT)
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port else ""
    repository = parts.path.strip("/")
    if not _REPOSITORY.match(repository):
        raise UsageError(
            f"bad cache URL {shown}: '{repository}' is not a repository name "
            "(lowercase letters, digits, '.', '_', '-', separated by '/')",
            hint=_HINT,
        )
    http = scheme == "oci+http" or (scheme == "oci" and host in LOOPBACK)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    register_secret(password)
    return CacheURL(
        kind="oci",
        display=f"oci://{netloc}/{repository}",
        host=netloc,
        repository=repository,
        http=http,
        username=user,
        password=password,
    )


def _file_url(netloc: str, path: str, shown: str) -> CacheURL:
    if netloc not in ("", "localhost") or not path.startswith("/"):
        raise UsageError(f"bad cache URL {shown}: a file cache is file:///ABSOLUTE/DIR", hint=_HINT)
    directory = Path(unquote(path))
    return CacheURL(kind="file", display=f"file://{directory}", directory=directory)


def split_list(text: str) -> list[str]:
    """``$INFINI_STACK_CACHE``'s URLs: separated by spaces or commas."""
    return [part for part in re.split(r"[\s,]+", text) if part]


def resolve(
    given: Iterable[str] | None, env: Mapping[str, str], manifest: Iterable[str]
) -> tuple[CacheURL, ...]:
    """``given`` (``--cache``; None when not given), else the environment, else the manifest."""
    if given is not None:
        texts = list(given)
    elif env.get(CACHE_ENV, "").strip():
        texts = split_list(env[CACHE_ENV])
    else:
        texts = list(manifest)
    out: list[CacheURL] = []
    for text in texts:
        url = parse(text)
        if url.display not in (u.display for u in out):
            out.append(url)
    return tuple(out)
