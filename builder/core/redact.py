"""Secrets never leave the tool: one redaction, applied wherever text is printed or written.

:func:`redact` replaces, in any text, the user-info of every URL (``https://oauth2:TOKEN@host``,
``ssh://git@host``, ``oci://user:pass@registry``), the user of an scp-like git address
(``git@github.com:org/repo``), credential query parameters (``?access_token=``, a presigned
``X-Amz-Signature=``), the value of an ``Authorization:`` header, and every value registered
with :func:`register_secret` (registry passwords and tokens the tool read or was given) by
``***``. :func:`redact_data` does the same to every string of a JSON-like structure.

It is applied where text leaves the tool: the error family (every message and hint), the
subprocess wrapper (its ``+ cmd`` echo, the log lines it writes and the output tail it keeps),
run reports, store records, plans, the SBOM, the bundle index and presets.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

MASK = "***"

# scheme://USERINFO@ : the user-info runs to the last '@' before the host's first '/'.
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"<>]+@")
# user@host:path (git's scp-like syntax): a host name (no '_') followed by ':' and a path.
_SCP_USER = re.compile(
    r"(?<![\w.+%~/:@-])[A-Za-z0-9._~%+-]+@(?=[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)[\w~./-])"
)
_QUERY = re.compile(
    r"([?&](?:access_token|token|password|passwd|secret|sig|signature|"
    r"X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=)[^&\s'\"#]+",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(r"(Authorization:\s*(?:Bearer|Basic|Token)\s+)[^\s'\"]+", re.IGNORECASE)

_lock = threading.Lock()
_secrets: set[str] = set()
MIN_SECRET = 4  # shorter values would mask ordinary words


def register_secret(value: str | None) -> None:
    """Mask ``value`` wherever it appears in text the tool prints or writes from now on."""
    if value and len(value) >= MIN_SECRET:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every credential it carries replaced by ``***``."""
    if not text:
        return text
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    if "@" in text:
        text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
        text = _SCP_USER.sub(f"{MASK}@", text)
    if "=" in text:
        text = _QUERY.sub(rf"\1{MASK}", text)
    if ":" in text:
        text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    return text


def redact_data(data: Any) -> Any:
    """A copy of a JSON-like structure with :func:`redact` applied to every string in it."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, Mapping):
        return {redact_data(k): redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(v) for v in data]
    return data


def strip_userinfo(url: str) -> str:
    """``url`` without any user-info: what identifies a repository whatever credentials reach it."""
    return _URL_USERINFO.sub(r"\1", url)
