"""ed25519 signatures over cache entries (the ``cryptography`` library).

A private key is a PKCS#8 PEM file (``infini-stack cache keygen`` writes one, mode 0600) or
the same PEM text in ``$INFINI_STACK_CACHE_SIGNING_KEY`` (a CI secret). A public key is one line,
``ed25519:<base64 of its 32 bytes>``: what keygen prints, what stack.yaml's ``cache.trust`` and
``--trust`` take (or a file holding that line or a PEM public key). A key's id is the first
16 hex digits of the SHA-256 of its 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from builder.core.errors import UsageError

KEY_ENV = "INFINI_STACK_CACHE_SIGNING_KEY"  # the PEM text itself
KEY_FILE_ENV = "INFINI_STACK_CACHE_SIGNING_KEY_FILE"
PREFIX = "ed25519:"
ALGORITHM = "ed25519"


@dataclass(frozen=True)
class Signer:
    key: Ed25519PrivateKey
    key_id: str
    public: str  # the one-line public key

    def sign(self, payload: bytes) -> dict[str, str]:
        value = base64.b64encode(self.key.sign(payload)).decode()
        return {"alg": ALGORITHM, "keyid": self.key_id, "public": self.public, "value": value}


@dataclass(frozen=True)
class Trust:
    """The public keys entries must be signed by; none: entries are checked by digest only."""

    keys: Mapping[str, Ed25519PublicKey]  # key id -> key

    @property
    def required(self) -> bool:
        return bool(self.keys)


class BadSignature(Exception):
    """Why an entry's signature is not accepted (the message is the reason)."""


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(raw_public(key)).hexdigest()[:16]


def public_line(key: Ed25519PublicKey) -> str:
    return PREFIX + base64.b64encode(raw_public(key)).decode()


def generate(path: Path) -> str:
    """Write a new private key to ``path`` (mode 0600, never over an existing file); returns
    the public key line."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(
            f"{path} exists: a signing key is never overwritten", hint="give another path"
        ) from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return public_line(key.public_key())


def signer_from(path: Path | None, env: Mapping[str, str]) -> Signer | None:
    """The signing key: ``path``, else ``$INFINI_STACK_CACHE_SIGNING_KEY`` (PEM text), else
    ``$INFINI_STACK_CACHE_SIGNING_KEY_FILE``; None when none is given."""
    if path is None and env.get(KEY_FILE_ENV):
        path = Path(env[KEY_FILE_ENV])
    if path is not None:
        try:
            pem = path.expanduser().read_bytes()
        except OSError as exc:
            raise UsageError(
                f"cannot read the signing key {path}: {exc.strerror}",
                hint="make one with `infini-stack cache keygen -o FILE`",
            ) from None
        return _signer(pem, str(path))
    text = env.get(KEY_ENV, "").strip()
    return _signer(text.encode(), f"${KEY_ENV}") if text else None


def _signer(pem: bytes, where: str) -> Signer:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"{where} is not an unencrypted PEM private key ({type(exc).__name__})",
            hint="make one with `infini-stack cache keygen -o FILE`",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{where} is not an ed25519 key", hint="`infini-stack cache keygen`")
    public = key.public_key()
    return Signer(key=key, key_id=key_id(public), public=public_line(public))


def parse_public(text: str, *, base: Path | None = None) -> Ed25519PublicKey:
    """A public key from its line, or from a file (relative to ``base``) holding it or a PEM."""
    text = text.strip()
    if text.startswith(PREFIX):
        return _from_line(text, text)
    path = Path(text).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"trusted key {text}: neither 'ed25519:<base64>' nor a readable file ({exc.strerror})"
        ) from None
    if data.strip().startswith(PREFIX.encode()):
        return _from_line(data.decode().strip(), str(path))
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise UsageError(f"trusted key file {path} holds no public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"trusted key file {path} is not an ed25519 public key")
    return key


def _from_line(line: str, where: str) -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(line.removeprefix(PREFIX), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError):
        raise UsageError(f"trusted key {where}: not an ed25519 public key line") from None


def trust_from(items: Iterable[str], *, base: Path | None = None) -> Trust:
    keys = [parse_public(item, base=base) for item in items]
    return Trust(keys={key_id(k): k for k in keys})


def verify(trust: Trust, signature: object, payload: bytes) -> str | None:
    """The signer's key id when the signature is good and its key trusted; None for an unsigned
    entry when no key is required. Raises :class:`BadSignature` saying why otherwise."""
    if signature is None:
        if trust.required:
            raise BadSignature("it is unsigned, and the cache's entries must be signed")
        return None
    if not isinstance(signature, dict) or signature.get("alg") != ALGORITHM:
        raise BadSignature("its signature is not an ed25519 signature")
    kid = str(signature.get("keyid", ""))
    key = trust.keys.get(kid)
    if key is None:
        if trust.required:
            raise BadSignature(f"it is signed by key {kid or '?'}, which is not trusted")
        key = _claimed(signature)  # integrity at least: the key it names must have signed it
        if key_id(key) != kid:
            raise BadSignature(f"its signature names key {kid} but carries another public key")
    try:
        key.verify(base64.b64decode(str(signature.get("value", ""))), payload)
    except (InvalidSignature, binascii.Error, ValueError):
        raise BadSignature(f"its signature by key {kid} does not match its contents") from None
    return kid


def _claimed(signature: Mapping[str, object]) -> Ed25519PublicKey:
    try:
        return _from_line(str(signature.get("public", "")), "the entry")
    except UsageError:
        raise BadSignature("its signature names no usable public key") from None
