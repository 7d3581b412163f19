"""The OCI distribution API over plain HTTP(S), with urllib: the few calls a cache needs.

Plain HTTP rather than ``oras-py``, measured: importing urllib.request, http.client, ssl and
json takes 20 ms and adds no dependency; ``import oras.client`` takes 128 ms and brings 12
packages (requests, jsonschema, ...; 34 MB). The calls are few (GET/HEAD manifests and blobs,
POST+PUT a monolithic blob upload, PUT a manifest), and owning them gives the timeouts, retries,
streaming digest checks and redaction the cache needs.

Authentication as registries do it: a 401 names the scheme in ``WWW-Authenticate``; ``Bearer
realm=...,service=...`` sends the credentials (or none: anonymous pull) to the token endpoint for
``repository:NAME:pull`` (``pull,push`` to push) and retries with the token; ``Basic`` retries
with the credentials. The ``Authorization`` header is never sent on after a redirect (blob
downloads are redirected to storage). Every token is registered for redaction.

Faults: a socket timeout per operation (``$INFINI_STACK_CACHE_TIMEOUT`` seconds, default 20),
connection errors, 429 and 5xx are retried (3 attempts, 0.5 s then 1 s apart); a blob that arrives
slower than 256 KB/s beyond the timeout is abandoned. What cannot be done raises Unavailable.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlencode, urljoin

from builder import __version__
from builder.cache import credentials
from builder.cache.remote import MAX_MANIFEST, Unavailable
from builder.cache.urls import CacheURL
from builder.core.redact import register_secret

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
TIMEOUT_ENV = "INFINI_STACK_CACHE_TIMEOUT"
ATTEMPTS = 3
MIN_RATE = 256 * 1024  # bytes per second a blob must keep up beyond the timeout
CHUNK = 1 << 20
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')

Response = http.client.HTTPResponse | urllib.error.HTTPError


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # under /v2/NAME, or an absolute URL (an upload location)
    scope: str = "pull"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Callable[[], bytes | IO[bytes] | None] = lambda: None


class _NoProxy(urllib.request.ProxyHandler):
    def __init__(self) -> None:
        super().__init__({})


@dataclass
class Registry:
    url: CacheURL
    env: Mapping[str, str]
    timeout: float = 20.0
    _auth: dict[str, str] = field(default_factory=dict)  # scope -> Authorization value
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.env.get(TIMEOUT_ENV):
            with contextlib.suppress(ValueError):
                self.timeout = float(self.env[TIMEOUT_ENV])
        handlers = [_NoProxy()] if self.url.http else []
        self._opener = urllib.request.build_opener(*handlers)

    @property
    def display(self) -> str:
        return self.url.display

    # --- the calls ------------------------------------------------------------------------------

    def manifest(self, tag: str) -> tuple[bytes, str] | None:
        call = Call("GET", f"/manifests/{tag}", headers={"Accept": MANIFEST_TYPE})
        with self._send(call, ok=(200, 404)) as response:
            if response.status == 404:
                return None
            data = _read_limited(response, MAX_MANIFEST, "manifest")
            return data, str(response.headers.get("Docker-Content-Digest") or "")

    def has_manifest(self, tag: str) -> bool:
        call = Call("HEAD", f"/manifests/{tag}", headers={"Accept": MANIFEST_TYPE})
        with self._send(call, ok=(200, 404)) as response:
            return response.status == 200

    def blob(self, digest: str, limit: int) -> Iterator[bytes]:
        with self._send(Call("GET", f"/blobs/{digest}"), ok=(200,)) as response:
            deadline = time.monotonic() + self.timeout + limit / MIN_RATE
            expected = int(response.headers.get("Content-Length") or -1)
            got = 0
            while chunk := self._chunk(response, digest):
                got += len(chunk)
                if got > limit:
                    raise Unavailable(f"{self.display}: blob {digest[:19]} is larger than declared")
                if time.monotonic() > deadline:
                    raise Unavailable(f"{self.display}: blob {digest[:19]} arrives too slowly")
                yield chunk
            if 0 <= got < expected:
                raise Unavailable(
                    f"{self.display}: blob {digest[:19]} broke off after {got} of {expected} bytes"
                )

    def _chunk(self, response: Response, digest: str) -> bytes:
        try:
            chunk: bytes = response.read(CHUNK)
            return chunk
        except (OSError, http.client.HTTPException) as exc:
            raise Unavailable(f"{self.display}: blob {digest[:19]} broke off: {exc}") from None

    def has_blob(self, digest: str) -> bool:
        with self._send(Call("HEAD", f"/blobs/{digest}", scope="pull,push"), ok=(200, 404)) as r:
            return r.status == 200

    def put_blob(self, digest: str, source: Path | bytes) -> None:
        size = len(source) if isinstance(source, bytes) else source.stat().st_size
        for attempt in range(ATTEMPTS):
            try:
                self._upload(digest, source, size)
                return
            except Unavailable:
                if attempt == ATTEMPTS - 1:
                    raise
                time.sleep(0.5 * 2**attempt)

    def _upload(self, digest: str, source: Path | bytes, size: int) -> None:
        start = Call("POST", "/blobs/uploads/", scope="pull,push", headers={"Content-Length": "0"})
        with self._send(start, ok=(202,), retry=False) as response:
            location = response.headers.get("Location")
        if not location:
            raise Unavailable(f"{self.display}: the upload started without a Location")
        target = urljoin(self.url.base, location)
        target += ("&" if "?" in target else "?") + "digest=" + quote(digest, safe="")

        def body() -> bytes | IO[bytes]:
            return source if isinstance(source, bytes) else source.open("rb")

        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        put = Call("PUT", target, scope="pull,push", headers=headers, body=body)
        with self._send(put, ok=(201, 204), retry=False):
            pass

    def put_manifest(self, tag: str, data: bytes, media_type: str) -> None:
        headers = {"Content-Type": media_type, "Content-Length": str(len(data))}
        call = Call("PUT", f"/manifests/{tag}", "pull,push", headers, lambda: data)
        with self._send(call, ok=(200, 201, 202)):
            pass

    # --- one request, authenticated and retried -------------------------------------------------

    def _send(self, call: Call, *, ok: tuple[int, ...], retry: bool = True) -> _Opened:
        tries = ATTEMPTS if retry else 1
        for attempt in range(tries):
            last = attempt == tries - 1
            response = self._authorized(call, last=last)
            if response is None:
                time.sleep(0.5 * 2**attempt)
                continue
            status = response.status or 0
            if status in ok:
                return _Opened(response)
            if (status == 429 or status >= 500) and not last:
                response.close()
                time.sleep(0.5 * 2**attempt)
                continue
            raise self._failure(call, response)
        raise AssertionError("unreachable")

    def _authorized(self, call: Call, *, last: bool) -> Response | None:
        response = self._open(call, self._auth.get(call.scope), last=last)
        if response is None or response.status != 401:
            return response
        challenge = str(response.headers.get("WWW-Authenticate") or "")
        response.close()
        value = self._authenticate(challenge, call.scope)
        with self._lock:
            self._auth[call.scope] = value
        return self._open(call, value, last=last)

    def _open(self, call: Call, auth: str | None, *, last: bool) -> Response | None:
        url = call.path if "://" in call.path else self.url.base + call.path
        body = call.body()
        headers = {"User-Agent": f"infini-stack/{__version__}", **call.headers}
        request = urllib.request.Request(url, data=body, method=call.method, headers=headers)
        if auth:
            request.add_unredirected_header("Authorization", auth)
        try:
            opened: Response = self._opener.open(request, timeout=self.timeout)
            return opened
        except urllib.error.HTTPError as exc:
            return exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if last:
                raise Unavailable(f"{self.display} is unreachable: {_reason(exc)}") from None
            return None
        finally:
            if hasattr(body, "close"):
                body.close()  # type: ignore[union-attr]

    def _authenticate(self, challenge: str, scope: str) -> str:
        creds = credentials.find(
            self.url.host, self.url.repository, self.env, (self.url.username, self.url.password)
        )
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if creds is None:
                raise _no_credentials(self.display)
            return creds.basic()
        if scheme != "bearer":
            raise Unavailable(f"{self.display} asks for unsupported authentication '{scheme}'")
        params = dict(_CHALLENGE.findall(challenge))
        if not params.get("realm"):
            raise Unavailable(f"{self.display}: its Bearer challenge names no token realm")
        query = {"scope": f"repository:{self.url.repository}:{scope}"}
        if params.get("service"):
            query["service"] = params["service"]
        return "Bearer " + self._token(params["realm"] + "?" + urlencode(query), creds)

    def _token(self, url: str, creds: credentials.Credentials | None) -> str:
        request = urllib.request.Request(url, headers={"User-Agent": f"infini-stack/{__version__}"})
        if creds is not None:
            request.add_unredirected_header("Authorization", creds.basic())
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                doc = json.loads(_read_limited(response, MAX_MANIFEST, "token"))
        except urllib.error.HTTPError as exc:
            what = f"with the credentials from {creds.source}" if creds else "anonymously"
            raise Unavailable(
                f"{self.display}: its token service refused a token {what} (HTTP {exc.code})",
                hint=_CREDENTIALS_HINT,
            ) from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            raise Unavailable(f"{self.display}: its token service failed: {_reason(exc)}") from None
        token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        if not token:
            raise Unavailable(f"{self.display}: its token service answered without a token")
        register_secret(str(token))
        return str(token)

    def _failure(self, call: Call, response: Response) -> Unavailable:
        status = response.status
        try:
            detail = _error_detail(response.read(64 * 1024))
        except (OSError, http.client.HTTPException):
            detail = ""
        finally:
            response.close()
        what = f"{call.method} {call.path.split('?')[0] if '://' not in call.path else 'upload'}"
        text = f"{self.display} refused {what}: HTTP {status}{detail}"
        if status in (401, 403):
            return Unavailable(text, hint=_CREDENTIALS_HINT)
        return Unavailable(text)


class _Opened:
    """A response as a context manager that always closes it."""

    def __init__(self, response: Response) -> None:
        self.response = response

    def __enter__(self) -> Response:
        return self.response

    def __exit__(self, *exc: object) -> None:
        self.response.close()


_CREDENTIALS_HINT = (
    "log in with `docker login HOST` (or podman/oras: their auth files are read), or set "
    "INFINI_STACK_CACHE_USERNAME and INFINI_STACK_CACHE_PASSWORD (or INFINI_STACK_CACHE_TOKEN)"
)


def _no_credentials(display: str) -> Unavailable:
    return Unavailable(f"{display} needs credentials and none were found", hint=_CREDENTIALS_HINT)


def _read_limited(response: Any, limit: int, what: str) -> bytes:
    data: bytes = response.read(limit + 1)
    if len(data) > limit:
        raise Unavailable(f"the registry's {what} is larger than {limit} bytes")
    return data


def _error_detail(body: bytes) -> str:
    try:
        errors = json.loads(body).get("errors") or []
        first = errors[0]
        return f" ({first.get('code', '')}: {first.get('message', '')})"
    except (ValueError, AttributeError, IndexError, TypeError):
        return ""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc.reason, str):
        exc = exc.reason
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
