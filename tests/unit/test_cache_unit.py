"""The remote cache's parts without a registry or a compiler: URLs, credentials, signatures,
the artifact's layer and its safe unpacking, relocation of text and links, the file cache."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import tarfile
from pathlib import Path

import pytest
import zstandard

from builder.cache import artifact, relocate, signing, transfer, urls
from builder.cache.credentials import find
from builder.cache.filecache import FileCache
from builder.cache.remote import Refused
from builder.core import contents
from builder.core.errors import UsageError


def test_cache_urls_parse_and_display_without_credentials() -> None:
    oci = urls.parse("oci://robot:tok-123456@ghcr.io/org/infini-cache")
    assert (oci.host, oci.repository, oci.http) == ("ghcr.io", "org/infini-cache", False)
    assert oci.display == "oci://ghcr.io/org/infini-cache" and oci.password == "tok-123456"
    assert urls.parse("oci://127.0.0.1:5000/c").http  # loopback: plain HTTP, as docker
    assert urls.parse("oci+http://harbor.lan/team/c").http
    assert urls.parse("file:///srv/cache").directory == Path("/srv/cache")
    for bad in ("https://x/y", "oci://host/", "oci://host/UPPER", "file://rel/dir", "oci://:9/x"):
        with pytest.raises(UsageError):
            urls.parse(bad)


def test_the_cache_list_comes_from_the_command_line_the_environment_or_the_manifest() -> None:
    env = {urls.CACHE_ENV: "oci://a.io/x, file:///b  oci://a.io/x"}
    assert [u.display for u in urls.resolve(None, env, ["file:///m"])] == [
        "oci://a.io/x",
        "file:///b",
    ]
    assert [u.display for u in urls.resolve(["file:///c"], env, [])] == ["file:///c"]
    assert [u.display for u in urls.resolve(None, {}, ["file:///m"])] == ["file:///m"]
    assert urls.resolve((), env, ["file:///m"]) == ()  # --no-cache


def test_credentials_come_from_the_environment_then_the_auth_files(tmp_path: Path) -> None:
    auth = base64.b64encode(b"bob:pw-from-docker").decode()
    docker = tmp_path / "docker"
    docker.mkdir()
    (docker / "config.json").write_text(
        json.dumps({"auths": {"https://reg.io/v1/": {"auth": auth}, "reg.io/team": {"auth": ""}}})
    )
    podman = tmp_path / "auth.json"
    podman.write_text(
        json.dumps({"auths": {"reg.io/team/cache": {"username": "p", "password": "pp"}}})
    )
    env = {"DOCKER_CONFIG": str(docker)}
    found = find("reg.io", "other/repo", env)
    assert found is not None and (found.username, found.password) == ("bob", "pw-from-docker")
    scoped = find("reg.io", "team/cache", {**env, "REGISTRY_AUTH_FILE": str(podman)})
    assert scoped is not None and scoped.username == "p"
    token = find("reg.io", "x", {**env, "INFINI_STACK_CACHE_TOKEN": "ci-token-9"})
    assert token is not None and token.password == "ci-token-9"
    assert find("elsewhere.io", "x", env) is None


def test_signatures_verify_and_say_why_they_do_not(tmp_path: Path) -> None:
    public = signing.generate(tmp_path / "k")
    signer = signing.signer_from(tmp_path / "k", {})
    assert signer is not None and signer.public == public
    payload = b'{"key":"abc"}'
    signature = signer.sign(payload)
    trust = signing.trust_from([public])
    assert signing.verify(trust, signature, payload) == signer.key_id
    with pytest.raises(signing.BadSignature, match="does not match its contents"):
        signing.verify(trust, signature, payload + b" ")
    with pytest.raises(signing.BadSignature, match="unsigned"):
        signing.verify(trust, None, payload)
    other = signing.trust_from([signing.generate(tmp_path / "other")])
    with pytest.raises(signing.BadSignature, match="not trusted"):
        signing.verify(other, signature, payload)
    assert signing.verify(signing.Trust({}), None, payload) is None  # no key required
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    env_signer = signing.signer_from(None, {signing.KEY_ENV: (tmp_path / "k").read_text()})
    assert env_signer is not None and env_signer.key_id == signer.key_id


def make_entry(root: Path) -> Path:
    prefix = root / "prefix"
    (prefix / "lib" / "cmake").mkdir(parents=True)
    (prefix / "lib" / "libx.so").write_bytes(b"\x7fELF" + bytes(100))
    (prefix / "lib" / "cmake" / "XConfig.cmake").write_text(
        "set(X_ROOT /old/home/store/k/prefix)\n"
    )
    (prefix / "bin").mkdir()
    (prefix / "bin" / "run.sh").write_text('#!/bin/sh\nexec /old/home/build/x "$@"\n')
    (prefix / "bin" / "run.sh").chmod(0o755)
    (prefix / "lib" / "libx.so.1").symlink_to("libx.so")
    (prefix / "lib" / "abs").symlink_to("/old/home/store/k/prefix/lib/libx.so")
    return prefix


def with_manifest(entry: Path, record: dict[str, object]) -> dict[str, object]:
    """``record`` of a store entry whose install manifest is written, as the store commits one
    (a push carries it, a pull checks the layer against it)."""
    return {**record, "manifest": contents.write(entry, contents.scan(entry / "prefix"))}


def test_a_layer_is_deterministic_and_unpacks_to_the_same_tree(tmp_path: Path) -> None:
    prefix = make_entry(tmp_path / "e")
    one = artifact.pack(prefix, tmp_path / "one")
    two = artifact.pack(prefix, tmp_path / "two")
    assert one == two and (tmp_path / "one").read_bytes() == (tmp_path / "two").read_bytes()
    artifact.unpack(tmp_path / "one", tmp_path / "out", one.unpacked)
    out = tmp_path / "out"
    assert (out / "lib" / "libx.so.1").readlink() == Path("libx.so")
    assert (out / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "lib" / "cmake" / "XConfig.cmake").read_text().startswith("set(X_ROOT")


def evil_layer(path: Path, *members: tuple[str, str]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, link in members:
            info = tarfile.TarInfo(name)
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ((("../escape", ""),), "outside the entry"),
        ((("/etc/x", ""),), "outside the entry"),
        ((("lib", "/etc"), ("lib/passwd", "")), "through a link"),
        ((("up", "../../x"),), "points outside"),
    ],
)
def test_a_layer_cannot_write_outside_its_entry(
    tmp_path: Path, members: tuple[tuple[str, str], ...], why: str
) -> None:
    with pytest.raises(Refused, match=why):
        artifact.unpack(evil_layer(tmp_path / "l", *members), tmp_path / "out", 100)


def test_text_and_links_naming_the_roots_are_found_and_rewritten(tmp_path: Path) -> None:
    prefix = make_entry(tmp_path / "e")
    roots = {"store": "/old/home/store", "home": "/old/home"}
    scan = relocate.scan(prefix, roots)
    assert {(f.path, f.kind) for f in scan.fixes} == {
        ("bin/run.sh", "text"),
        ("lib/cmake/XConfig.cmake", "text"),
        ("lib/abs", "symlink"),
    }
    assert scan.stuck == ()
    mapping = relocate.mapping_for(scan.table(), {"store": "/new/s", "home": "/new/h"})
    relocate.relocate(prefix, scan.table(), mapping)
    assert (
        prefix / "lib" / "cmake" / "XConfig.cmake"
    ).read_text() == "set(X_ROOT /new/s/k/prefix)\n"
    assert "/new/h/build/x" in (prefix / "bin" / "run.sh").read_text()
    assert (prefix / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert str((prefix / "lib" / "abs").readlink()) == "/new/s/k/prefix/lib/libx.so"
    assert relocate.leftovers(prefix, scan.table(), list(mapping)) == []


def test_a_root_is_matched_as_a_whole_path_only() -> None:
    assert relocate.substitute("/old/home2 /old/home/x /old/home", {"/old/home": "/n"}) == (
        "/old/home2 /n/x /n"
    )


def test_a_root_inside_a_binary_is_stuck_with_its_offset(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "blob.bin").write_bytes(b"\0\1\2" + b"/old/home/src/x.cpp\0" + b"\3")
    scan = relocate.scan(prefix, {"home": "/old/home"})
    assert scan.fixes == ()
    assert [(s.path, s.offset) for s in scan.stuck] == [("blob.bin", 3)]
    assert "/old/home/src/x.cpp" in str(scan.stuck[0])


def test_a_file_cache_round_trips_an_entry_and_refuses_a_tampered_one(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    make_entry(entry)
    cache = FileCache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    record = with_manifest(entry, {"name": "x", "vendor": "cpu", "build_dir": "/old/home/build/x"})
    roots = {"store": "/old/home/store", "home": "/old/home"}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    published = transfer.publish(cache, "k" * 64, entry, record, roots, None, scratch)
    assert published is not None and published.relocations == 3
    assert transfer.publish(cache, "k" * 64, entry, record, roots, None, scratch) is None
    found = transfer.lookup(cache, "k" * 64, signing.Trust({}))
    assert found is not None
    staging = tmp_path / "staging"
    staging.mkdir()
    got = transfer.download(found, staging, scratch, {"store": "/s", "home": "/h"})
    assert got["build_dir"] == "/h/build/x" and got["origin"]["cache"] == cache.display
    assert "exec /h/build/x" in (staging / "prefix" / "bin" / "run.sh").read_text()
    layer = cache.root / "blobs" / "sha256" / found.layer.digest.split(":")[1]
    layer.write_bytes(layer.read_bytes()[:-1] + b"\0")
    staging2 = tmp_path / "staging2"
    staging2.mkdir()
    with pytest.raises(Refused, match="does not match its digest"):
        transfer.download(found, staging2, scratch, {"store": "/s", "home": "/h"})
    assert transfer.lookup(cache, "0" * 64, signing.Trust({})) is None


@pytest.mark.parametrize(
    "relocation",
    [
        "oops",  # not a table
        {"roots": {"store": "/old/home/store"}, "files": [{"path": "bin/run.sh"}]},  # no kind
        {"roots": {"store": "/old/home/store"}, "files": [{"path": "nope", "kind": "text"}]},
        {"roots": {"store": "/old/home/store"}, "files": [{"path": "bin/run.sh", "kind": "?"}]},
        {"roots": {"store": "/old/home/store"}, "files": [{"path": "out/f", "kind": "text"}]},
    ],
    ids=["not-a-table", "no-kind", "missing-file", "unknown-kind", "through-a-link"],
)
def test_a_relocation_table_that_does_not_fit_its_layer_is_refused_and_writes_nothing_outside(
    tmp_path: Path, relocation: object
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("/old/home/store stays\n")
    entry = tmp_path / "entry"
    make_entry(entry)
    (entry / "prefix" / "out").symlink_to(outside)  # a link the layer may hold, to a directory
    cache = FileCache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    roots = {"store": "/old/home/store", "home": "/old/home"}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    record = with_manifest(entry, {"name": "x", "vendor": "cpu"})
    assert transfer.publish(cache, "k" * 64, entry, record, roots, None, scratch) is not None
    found = transfer.lookup(cache, "k" * 64, signing.Trust({}))
    assert found is not None
    forged = dataclasses.replace(found, statement={**found.statement, "relocation": relocation})
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(Refused, match="relocation table"):
        transfer.download(forged, staging, scratch, {"store": "/s", "home": "/h"})
    assert (outside / "f").read_text() == "/old/home/store stays\n"


def test_a_push_failing_after_a_build_failure_is_a_warning_not_the_error_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from builder.core.errors import BuildError
    from builder.pipeline import build

    message = "cache oci://host/x is required: connection refused"

    def refuse(*_args: object) -> None:
        raise BuildError(message)

    said: list[tuple[str, str]] = []

    class Progress:
        def say(self, who: str, text: str) -> None:
            said.append((who, text))

    monkeypatch.setattr(build, "_push", refuse)
    build._push_after_failure(None, None, None, None, Progress())  # type: ignore[arg-type]
    assert said == [("cache", f"warning: not pushed after the failure: {message}")]
