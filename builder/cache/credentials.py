"""Registry credentials, from where users keep them; every secret found is registered for
redaction before it is used.

In order: the cache URL's user-info (discouraged), ``$INFINI_STACK_CACHE_USERNAME`` with
``$INFINI_STACK_CACHE_PASSWORD`` (or ``$INFINI_STACK_CACHE_TOKEN``, e.g. a CI job's token, as the
password), then the ``auths`` of the Docker/OCI auth files: ``$REGISTRY_AUTH_FILE``,
``$XDG_RUNTIME_DIR/containers/auth.json``, ``$DOCKER_CONFIG/config.json``,
``~/.docker/config.json`` (an ``auth`` entry is base64 ``user:password``; podman's
``host/namespace`` keys match the longest prefix of the repository). Credential helpers
(``credsStore``, ``credHelpers``) are not run.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.core.redact import register_secret

USER_ENV = "INFINI_STACK_CACHE_USERNAME"
PASSWORD_ENV = "INFINI_STACK_CACHE_PASSWORD"
TOKEN_ENV = "INFINI_STACK_CACHE_TOKEN"
TOKEN_USER = "infini-stack"  # registries that take a token as a password ignore the user name


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    source: str  # where they came from, for messages (never the values)

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        value = base64.b64encode(raw).decode()
        register_secret(value)
        return f"Basic {value}"


def auth_files(env: Mapping[str, str]) -> Iterator[Path]:
    if env.get("REGISTRY_AUTH_FILE"):
        yield Path(env["REGISTRY_AUTH_FILE"])
    if env.get("XDG_RUNTIME_DIR"):
        yield Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    if env.get("DOCKER_CONFIG"):
        yield Path(env["DOCKER_CONFIG"]) / "config.json"
    if env.get("HOME"):
        yield Path(env["HOME"]) / ".docker" / "config.json"


def find(
    host: str,
    repository: str,
    env: Mapping[str, str],
    given: tuple[str | None, str | None] = (None, None),
) -> Credentials | None:
    """The credentials for ``host``/``repository``, or None (anonymous)."""
    user, password = given
    if password:
        return _found(user or TOKEN_USER, password, "the cache URL")
    password = env.get(PASSWORD_ENV) or env.get(TOKEN_ENV)
    if password:
        which = PASSWORD_ENV if env.get(PASSWORD_ENV) else TOKEN_ENV
        return _found(env.get(USER_ENV) or TOKEN_USER, password, f"${which}")
    for path in auth_files(env):
        found = _from_file(path, host, repository)
        if found is not None:
            return found
    return None


def _found(user: str, password: str, source: str) -> Credentials:
    register_secret(password)
    return Credentials(user, password, source)


def _from_file(path: Path, host: str, repository: str) -> Credentials | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        return None
    best: tuple[int, dict[str, str]] | None = None
    for raw_key, entry in auths.items():
        scope = _normalize(str(raw_key))
        if not isinstance(entry, dict):
            continue
        target = f"{host}/{repository}"
        inside = target == scope or target.startswith(scope + "/")
        matches = scope == host or (inside and scope.startswith(host + "/"))
        if matches and (best is None or len(scope) > best[0]):
            best = (len(scope), entry)
    return _entry(best[1], str(path)) if best else None


def _normalize(key: str) -> str:
    """``https://ghcr.io/v1/`` -> ``ghcr.io``; podman's ``host/namespace`` keys are kept."""
    key = key.split("://", 1)[-1].rstrip("/")
    for suffix in ("/v1", "/v2"):
        key = key.removesuffix(suffix)
    return key


def _entry(entry: Mapping[str, str], source: str) -> Credentials | None:
    if entry.get("auth"):
        register_secret(entry["auth"])
        try:
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return _found(user, password, source) if password else None
    if entry.get("username") and entry.get("password"):
        return _found(entry["username"], entry["password"], source)
    return None
