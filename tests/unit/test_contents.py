"""Install manifests: each kind of change to a committed entry is found and named, file by file;
an entry without a manifest is unverifiable, not broken; the disk-full line names the place."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builder.core import contents, diskspace
from builder.core.layout import Layout
from builder.engine.store import Store

KEY = "ab" * 32


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(Layout.from_env({}, home=tmp_path / "home"))
    prefix = store.begin(KEY) / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libx.so.1").write_bytes(b"\x7fELF" + bytes(64))
    (prefix / "lib" / "libx.so").symlink_to("libx.so.1")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "tool").write_text("#!/bin/sh\n")
    (prefix / "bin" / "tool").chmod(0o755)
    store.commit(KEY, {"key": KEY, "name": "minix", "vendor": "cpu"})
    return store


def lib(store: Store) -> Path:
    return store.layout.entry_prefix(KEY) / "lib"


def only_difference(store: Store) -> contents.Difference:
    verdict = store.verify(KEY[:32])
    assert verdict.state == "changed"
    assert len(verdict.differences) == 1, verdict.differences
    return verdict.differences[0]


def test_a_committed_entry_verifies_and_its_record_names_its_manifest(store: Store) -> None:
    verdict = store.verify(KEY[:32])
    assert verdict.state == "ok" and verdict.ok
    said = store.record(KEY)["manifest"]
    data = (store.layout.entry(KEY) / contents.MANIFEST).read_bytes()
    assert said["digest"] == contents.digest_of(data) and said["files"] == 2
    paths = json.loads(data)["paths"]
    assert paths["lib/libx.so"] == {"type": "link", "target": "libx.so.1"}
    assert paths["bin/tool"]["mode"] == "0755" and paths["lib"]["type"] == "dir"


def test_a_changed_byte_is_named(store: Store) -> None:
    path = lib(store) / "libx.so.1"
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    found = only_difference(store)
    assert (found.what, found.path) == ("changed", "lib/libx.so.1")
    assert "content changed" in found.detail
    assert "lib/libx.so.1" in "\n".join(store.verify(KEY[:32]).lines())


def test_a_removed_file_is_named(store: Store) -> None:
    (store.layout.entry_prefix(KEY) / "bin" / "tool").unlink()
    found = only_difference(store)
    assert (found.what, found.path) == ("missing", "bin/tool")


def test_an_added_file_is_named(store: Store) -> None:
    (lib(store) / "libevil.so").write_bytes(b"x")
    found = only_difference(store)
    assert (found.what, found.path) == ("extra", "lib/libevil.so")


def test_a_changed_mode_is_named(store: Store) -> None:
    (store.layout.entry_prefix(KEY) / "bin" / "tool").chmod(0o777)
    found = only_difference(store)
    assert (found.what, found.path) == ("changed", "bin/tool")
    assert found.detail == "mode 0777, was 0755"


def test_a_replaced_symlink_is_named(store: Store) -> None:
    link = lib(store) / "libx.so"
    link.unlink()
    link.symlink_to("/usr/lib/libx.so")
    found = only_difference(store)
    assert (found.what, found.path) == ("changed", "lib/libx.so")
    assert "/usr/lib/libx.so" in found.detail


def test_a_symlink_replaced_by_its_target_file_is_named(store: Store) -> None:
    link = lib(store) / "libx.so"
    data = link.read_bytes()
    link.unlink()
    link.write_bytes(data)
    found = only_difference(store)
    assert found.path == "lib/libx.so" and "was a link to libx.so.1" in found.detail


def test_a_tampered_manifest_is_damage_not_a_pass(store: Store) -> None:
    manifest = store.layout.entry(KEY) / contents.MANIFEST
    manifest.write_text(manifest.read_text().replace("0755", "0777"))
    verdict = store.verify(KEY[:32])
    assert verdict.state == "changed" and "does not hash to the digest" in verdict.problem


def test_an_entry_made_before_manifests_is_unverifiable_not_broken(store: Store) -> None:
    entry = store.layout.entry(KEY)
    (entry / contents.MANIFEST).unlink()
    record = json.loads((entry / "record.json").read_text())
    del record["manifest"]
    (entry / "record.json").write_text(json.dumps(record))
    verdict = store.verify(KEY[:32])
    assert verdict.state == "unverifiable" and verdict.ok
    assert "unverifiable" in verdict.lines()[0]


def test_sha256_is_the_digest_and_matches_hashlib(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "f"
    path.write_bytes(os.urandom(3 << 20))
    assert contents.file_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_disk_full_line_names_the_filesystem_a_message_points_at(tmp_path: Path) -> None:
    home, store = tmp_path / "home", tmp_path / "home" / "store"
    space = diskspace.Space.now({"home": home, "store": store, "temporary directory": Path("/")})
    text = f"cc1plus: fatal error: {home}/build/x.o: No space left on device"
    line = space.explain(text)
    assert line is not None and "free when the run started" in line
    assert "home" in line and str(home) in line
    assert space.explain("a failure of another kind") is None
