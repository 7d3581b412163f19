"""Air-gapped sources: `bundle` writes every pin (components and submodules) with an index;
`fetch --bundle` and `build --bundle` use it with the network off, checking every SHA."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from builder.sources.bundle import read_index
from tests.gitrepos import (
    PUBLIC,
    add_submodule,
    cmake_library,
    commit,
    git,
    init_repo,
    mirror,
    public_stack,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def upstream(tmp_path: Path) -> dict[str, str]:
    """Two repositories under tmp/mirrors, one with a submodule; returns their pins."""
    root = tmp_path / "mirrors"
    json_sha = init_repo(root / "json.git", {"json.hpp": "// v1\n"})
    commit(root / "json.git", {"json.hpp": "// v2\n"}, "newer, not pinned")
    rt = init_repo(root / "rt.git", cmake_library("rt"))
    lm = root / "lm.git"
    init_repo(lm, cmake_library("lm"))
    add_submodule(lm, f"{PUBLIC}/json.git", "third_party/json", json_sha, root)
    return {"rt": rt, "lm": commit(lm, {}, "pin json"), "json": json_sha}


def make_bundle(cli, tmp_path: Path, pins: dict[str, str]) -> Path:  # type: ignore[no-untyped-def]
    stack = public_stack(tmp_path / "online", pins)
    out = tmp_path / "sources.tar"
    result = cli(
        "bundle",
        "--manifest",
        stack,
        "--vendor",
        "cpu",
        "-o",
        out,
        "--mirror",
        mirror(tmp_path / "mirrors"),
    )
    assert result.code == 0, result.err
    return out


def go_offline(tmp_path: Path, home: Path) -> None:
    """No mirror, no cache: only the bundle is left."""
    shutil.rmtree(tmp_path / "mirrors")
    shutil.rmtree(home, ignore_errors=True)


def test_bundle_holds_every_pin_with_submodules_and_an_index_of_urls_and_shas(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = make_bundle(cli, tmp_path, {"rt": upstream["rt"], "lm": upstream["lm"]})
    index = read_index(out)
    assert index.vendor == "cpu"
    pins = {(p.component, p.path): (p.url, p.rev) for p in index.pins}
    assert pins == {
        ("rt", ""): (f"{PUBLIC}/rt.git", upstream["rt"]),
        ("lm", ""): (f"{PUBLIC}/lm.git", upstream["lm"]),
        ("lm", "third_party/json"): (f"{PUBLIC}/json.git", upstream["json"]),
    }
    repos = {r.url: r for r in index.repositories}
    assert set(repos) == {f"{PUBLIC}/rt.git", f"{PUBLIC}/lm.git", f"{PUBLIC}/json.git"}
    assert repos[f"{PUBLIC}/json.git"].commits == (upstream["json"],)
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert names[0] == "index.json"
    assert sorted(names[1:]) == sorted(r.member for r in index.repositories)


def test_fetch_from_bundle_works_with_no_mirror_no_cache_and_no_network(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    pins = {"rt": upstream["rt"], "lm": upstream["lm"]}
    out = make_bundle(cli, tmp_path, pins)
    go_offline(tmp_path, home)
    stack = public_stack(tmp_path / "offline", pins)
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--bundle", out)
    assert result.code == 0, result.err
    trees = {line.split()[0]: Path(line.split()[-1]) for line in result.out.splitlines()}
    assert git(trees["lm"], "rev-parse", "HEAD") == upstream["lm"]
    assert (trees["lm"] / "third_party" / "json" / "json.hpp").read_text() == "// v1\n"
    assert git(trees["lm"] / "third_party" / "json", "rev-parse", "HEAD") == upstream["json"]


def test_build_from_bundle_builds_offline(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    pins = {"rt": upstream["rt"]}
    out = make_bundle(cli, tmp_path, pins)
    go_offline(tmp_path, home)
    stack = public_stack(tmp_path / "offline", pins)
    result = cli(
        "build",
        "--manifest",
        stack,
        "--vendor",
        "cpu",
        "--bundle",
        out,
        "--launcher",
        "none",
        "--no-memo",
    )
    assert result.code == 0, result.err
    assert "1 built" in result.err


def test_tampered_bundle_is_refused_naming_the_repository(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    pins = {"rt": upstream["rt"]}
    out = make_bundle(cli, tmp_path, pins)
    tampered = tmp_path / "tampered.tar"
    with tarfile.open(out) as src, tarfile.open(tampered, "w") as dst:
        for member in src.getmembers():
            data = bytearray(src.extractfile(member).read())  # type: ignore[union-attr]
            if member.name.endswith(".bundle"):
                data[-20] ^= 0xFF
            member.size = len(data)
            dst.addfile(member, io.BytesIO(bytes(data)))
    go_offline(tmp_path, home)
    stack = public_stack(tmp_path / "offline", pins)
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--bundle", tampered)
    assert result.code == 4
    assert f"({PUBLIC}/rt.git) does not match its index" in result.err
    assert "Traceback" not in result.err


def test_bundle_whose_index_was_rewritten_to_match_still_fails_on_git_objects(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    import hashlib

    pins = {"rt": upstream["rt"]}
    out = make_bundle(cli, tmp_path, pins)
    forged = tmp_path / "forged.tar"
    with tarfile.open(out) as src:
        index = json.loads(src.extractfile("index.json").read())  # type: ignore[union-attr]
        member = index["repositories"][0]["member"]
        data = bytearray(src.extractfile(member).read())  # type: ignore[union-attr]
    data[-40] ^= 0xFF
    index["repositories"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    blob = json.dumps(index).encode()
    with tarfile.open(forged, "w") as dst:
        for name, payload in (("index.json", blob), (member, bytes(data))):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            dst.addfile(info, io.BytesIO(payload))
    go_offline(tmp_path, home)
    result = cli(
        "fetch",
        "--manifest",
        public_stack(tmp_path / "offline", pins),
        "--vendor",
        "cpu",
        "--bundle",
        forged,
    )
    assert result.code == 4
    assert f"({PUBLIC}/rt.git) cannot be imported" in result.err


def test_bundle_missing_a_needed_sha_names_it_and_exits_4(
    tmp_path: Path,
    home: Path,
    upstream: dict[str, str],
    cli,  # type: ignore[no-untyped-def]
) -> None:
    out = make_bundle(cli, tmp_path, {"rt": upstream["rt"], "lm": upstream["lm"]})
    newer = commit(
        tmp_path / "mirrors" / "rt.git",
        {"rt.c": "int answer(void) { return 1; }\n"},
        "after the bundle",
    )
    go_offline(tmp_path, home)
    stack = public_stack(tmp_path / "offline", {"rt": newer, "lm": upstream["lm"]})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--bundle", out)
    assert result.code == 4
    assert f"commit {newer} of component 'rt' ({PUBLIC}/rt.git) is not in the bundle {out}" in (
        result.err
    )
    assert "infini-stack bundle" in result.err  # the hint says how to make a complete one


def test_not_a_bundle_is_a_clear_error(
    tmp_path: Path, home: Path, upstream: dict[str, str], cli
) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar")
    stack = public_stack(tmp_path / "offline", {"rt": upstream["rt"]})
    result = cli("fetch", "--manifest", stack, "--vendor", "cpu", "--bundle", junk)
    assert result.code == 4
    assert "is not a source bundle" in result.err
