"""Moving one entry: look its key up, download it into a staging directory, or publish it.

Pull: the manifest the key's tag names, its config blob (digest checked), the statement's
signature (against the trusted keys), the statement's key and layer against the manifest, then
the layer (streamed to a file, digest and size checked), unpacked, compared file by file with the
install manifest the statement carries, relocated, and checked to name none of the builder's roots
any more. Push (of an entry the caller has checked against its manifest): scan for relocations (a
stuck path: not pushed), the layer, the config with the manifest in its statement, each blob only
when missing, and the manifest's tag last.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.cache import artifact, relocate
from builder.cache.filecache import FileCache
from builder.cache.oci import Registry
from builder.cache.remote import MAX_CONFIG, Refused, Remote
from builder.cache.signing import BadSignature, Signer, Trust, verify
from builder.cache.urls import CacheURL
from builder.core import contents
from builder.core.errors import StackError


@dataclass(frozen=True)
class Found:
    """An entry found for a key, its manifest, config and signature checked."""

    remote: Remote
    key: str
    manifest_digest: str
    layer: artifact.Descriptor
    statement: Mapping[str, Any]
    signer: str | None

    @property
    def unpacked(self) -> int:
        return int(self.statement["layer"]["unpacked"])


@dataclass(frozen=True)
class Stuck(Exception):
    """The entry names its roots where they cannot be rewritten; it is not pushed."""

    places: tuple[relocate.Stuck, ...]


def lookup(remote: Remote, key: str, trust: Trust) -> Found | None:
    """The entry ``key`` names in ``remote``, checked up to its layer; None when it has none."""
    got = remote.manifest(artifact.tag_for(key))
    if got is None:
        return None
    data, claimed = got
    digest = artifact.digest_of(data)
    if claimed and claimed != digest:
        raise Refused(
            f"its manifest hashes to {digest[:19]}, not the {claimed[:19]} it was sent as"
        )
    config_ref, layer = artifact.parse_manifest(data, "its manifest")
    if config_ref.size > MAX_CONFIG:
        raise Refused(f"its config declares {config_ref.size} bytes, over {MAX_CONFIG}")
    config = _config(b"".join(_checked(remote, config_ref, "config")))
    statement = config["statement"]
    try:
        signer = verify(trust, config.get("signature"), artifact.canonical(statement))
    except BadSignature as exc:
        raise Refused(str(exc)) from None
    _agree(statement, key, layer)
    return Found(remote, key, digest, layer, statement, signer)


def _config(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError:
        raise Refused("its config is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("statement"), dict):
        raise Refused("its config holds no statement")
    return doc


def _agree(statement: Mapping[str, Any], key: str, layer: artifact.Descriptor) -> None:
    """The signed statement names this key and the manifest's layer."""
    if statement.get("format") != artifact.FORMAT:
        raise Refused(f"its format {statement.get('format')!r} is not {artifact.FORMAT}")
    if statement.get("key") != key:
        raise Refused(f"its statement is for key {str(statement.get('key'))[:12]}, not this one")
    said = statement.get("layer") or {}
    if said.get("digest") != layer.digest or said.get("size") != layer.size:
        raise Refused("its manifest's layer is not the one its statement names")
    if not isinstance(said.get("unpacked"), int) or not isinstance(statement.get("record"), dict):
        raise Refused("its statement lacks the layer's size or the store record")


def _checked(remote: Remote, ref: artifact.Descriptor, what: str) -> list[bytes]:
    sha = hashlib.sha256()
    chunks = []
    for chunk in remote.blob(ref.digest, ref.size):
        sha.update(chunk)
        chunks.append(chunk)
    _check_digest(sha, sum(len(c) for c in chunks), ref, what)
    return chunks


def _check_digest(sha: Any, size: int, ref: artifact.Descriptor, what: str) -> None:
    got = f"sha256:{sha.hexdigest()}"
    if got != ref.digest or size != ref.size:
        raise Refused(
            f"its {what} blob does not match its digest ({size} bytes hashing to {got[:19]}, "
            f"the manifest says {ref.size} bytes, {ref.digest[:19]}): tampered with or damaged"
        )


def download(
    found: Found, staging: Path, scratch: Path, roots: Mapping[str, str]
) -> dict[str, Any]:
    """Unpack ``found`` into ``staging/prefix``, relocated for ``roots``; returns its record."""
    layer_file = scratch / f"{found.key[:32]}.layer"
    sha = hashlib.sha256()
    size = 0
    with layer_file.open("wb") as out:
        for chunk in found.remote.blob(found.layer.digest, found.layer.size):
            sha.update(chunk)
            size += len(chunk)
            out.write(chunk)
    _check_digest(sha, size, found.layer, "layer")
    prefix = staging / "prefix"
    try:
        artifact.unpack(layer_file, prefix, found.unpacked)
    except (OSError, ValueError, EOFError) as exc:
        raise Refused(f"its layer cannot be unpacked ({type(exc).__name__}: {exc})") from None
    finally:
        layer_file.unlink(missing_ok=True)
    check_contents(found.statement, prefix)
    table = found.statement.get("relocation") or {}
    try:
        mapping = relocate.mapping_for(table, roots)
        rewritten = relocate.relocate(prefix, table, mapping)
        left = relocate.leftovers(prefix, table, list(mapping))
    except Refused:
        raise
    except (StackError, OSError, KeyError, TypeError, AttributeError, ValueError) as exc:
        # A table that does not fit its layer: refused (and built here), never a crash.
        raise Refused(f"its relocation table cannot be applied ({exc})") from None
    if left:
        raise Refused(f"it still names the builder's paths after relocation: {', '.join(left[:5])}")
    record: dict[str, Any] = relocate.substitute_data(dict(found.statement["record"]), mapping)
    record["origin"] = {
        "cache": found.remote.display,
        "manifest": found.manifest_digest,
        "layer": found.layer.digest,
        "signer": found.signer,
        "pulled": time.time(),
        "relocated": rewritten,
    }
    return record


def check_contents(statement: Mapping[str, Any], prefix: Path) -> None:
    """The unpacked layer against the install manifest the signed statement carries (whose
    digest its record gives): a layer that is not what was recorded is refused, whatever signed
    it, with each path that differs named."""
    said = (statement.get("record") or {}).get("manifest")
    doc = statement.get("manifest")
    if not isinstance(said, dict) or not isinstance(doc, dict):
        raise Refused("it carries no install manifest (pushed by an older infini-stack)")
    try:
        items = contents.parse(doc)
    except ValueError as exc:
        raise Refused(f"its install manifest is unreadable: {exc}") from None
    if contents.digest_of(contents.encode(items)) != said.get("digest"):
        raise Refused("its install manifest is not the one its record names")
    differences = contents.compare(prefix, items)
    if differences:
        shown = "; ".join(d.line() for d in differences[:10])
        more = f" (and {len(differences) - 10} more)" if len(differences) > 10 else ""
        raise Refused(f"its files differ from its install manifest: {shown}{more}")


# --- push ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    manifest_digest: str
    bytes: int  # what was uploaded (0: it was there)
    relocations: int


def publish(
    remote: Remote,
    key: str,
    entry: Path,
    record: Mapping[str, Any],
    roots: Mapping[str, str],
    signer: Signer | None,
    scratch: Path,
) -> Published | None:
    """Upload the entry at ``entry``; None when the key is there already (a no-op)."""
    tag = artifact.tag_for(key)
    if remote.has_manifest(tag):
        return None
    scan = relocate.scan(entry / "prefix", roots)
    if scan.stuck:
        raise Stuck(scan.stuck)
    layer_file = scratch / f"{key[:32]}.push"
    try:
        layer = artifact.pack(entry / "prefix", layer_file)
        pushed = {k: v for k, v in record.items() if k != "origin"}
        statement = artifact.statement(key, layer, pushed, scan.table())
        statement["manifest"] = json.loads((entry / contents.MANIFEST).read_bytes())
        signature = signer.sign(artifact.canonical(statement)) if signer else None
        config = artifact.canonical({"statement": statement, "signature": signature})
        uploaded = 0
        if not remote.has_blob(layer.digest):
            remote.put_blob(layer.digest, layer_file)
            uploaded += layer.size
        config_digest = artifact.digest_of(config)
        if not remote.has_blob(config_digest):
            remote.put_blob(config_digest, config)
            uploaded += len(config)
        annotations = {
            "org.opencontainers.image.title": f"{record.get('name')} ({record.get('vendor')})",
            "dev.infini-stack.key": key,
            "dev.infini-stack.signer": signer.key_id if signer else "",
        }
        manifest = artifact.manifest(config, layer, annotations)
        remote.put_manifest(tag, manifest, artifact.MANIFEST_TYPE)
        return Published(artifact.digest_of(manifest), uploaded + len(manifest), len(scan.fixes))
    finally:
        layer_file.unlink(missing_ok=True)


def open_remote(url: CacheURL, env: Mapping[str, str]) -> Remote:
    """The backend of ``url``: a directory, or a registry."""
    if url.kind == "file":
        assert url.directory is not None
        return FileCache(url.directory)
    return Registry(url, env)
