"""The remote cache against a real registry (Debian's docker-registry on loopback) and a
``file://`` directory: push from one home, pull into another with a different store path,
refuse what is tampered with or not trusted, survive a registry that dies mid-pull, two pushers
at once, and never write a credential anywhere.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT, CliResult, last_report
from tests.registry import Registry, bcrypt_line, registry_binary
from tests.tcpfault import CuttingProxy

pytestmark = pytest.mark.integration

MINI_ARGS = ("--vendor", "cpu", "--progress", "plain", "--no-memo")
MINI_MANIFEST = ROOT / "examples" / "mini-stack" / "stack.yaml"
STACK = ("--manifest", str(MINI_MANIFEST), *MINI_ARGS)
NAMES = ("minirt", "miniops", "miniccl", "minilm")
PKG_CONFIG = r"""
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/miniops.pc "prefix=${CMAKE_INSTALL_PREFIX}
libdir=\${prefix}/lib
rt=${MINI_RT_ROOT}
# configured in ${CMAKE_CURRENT_BINARY_DIR}
Name: miniops
Version: 0.1.0
Description: the mini stack's operators
Libs: -L\${libdir} -lminiops
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/miniops.pc DESTINATION lib/pkgconfig)
"""


def build(cli, manifest: Path, home: Path, *extra: str | Path) -> CliResult:  # type: ignore[no-untyped-def]
    result: CliResult = cli("build", "--manifest", manifest, "--home", home, *MINI_ARGS, *extra)
    return result


def statuses(home: Path) -> dict[str, str]:
    return {c["name"]: c["status"] for c in last_report(home)["components"]}


def keygen(cli, path: Path) -> str:  # type: ignore[no-untyped-def]
    result = cli("cache", "keygen", "-o", path)
    assert result.code == 0, result.err
    return str(result.out.strip())


def leaky(manifest: Path) -> Path:
    """The mini stack made to write the paths it is built under into its entries, as real
    projects do: miniops installs a pkg-config file naming its prefix, MiniRT's prefix and its
    build directory; minilm's libraries get RUNPATHs to the store entries they link."""
    root = manifest.parent
    ops = root / "ops" / "CMakeLists.txt"
    ops.write_text(ops.read_text() + PKG_CONFIG)
    text = manifest.read_text().replace(
        "  minilm: {path: engine}",
        "  minilm: {path: engine, options: {CMAKE_INSTALL_RPATH_USE_LINK_PATH: 'ON'}}",
    )
    manifest.write_text(text)
    return manifest


def files_naming(root: Path, needle: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def test_pull_into_a_second_home_compiles_nothing_and_relocates_every_path(
    cli, mini: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    manifest = leaky(mini)
    first, second = tmp_path / "first-home", tmp_path / "a-second-home-elsewhere"
    url = registry.url()
    pushed = build(cli, manifest, first, "--cache", url, "--push")
    assert pushed.code == 0, pushed.err
    assert set(statuses(first).values()) == {"built"}
    assert files_naming(first / "store", str(first)), "the leaky stack leaks nothing to relocate"

    pulled = build(cli, manifest, second, "--cache", url)
    assert pulled.code == 0, pulled.err
    assert statuses(second) == dict.fromkeys(NAMES, "pulled")
    report = last_report(second)
    assert report["totals"]["built"] == 0 and report["totals"]["pulled"] == 4
    assert "0 built" in pulled.err and "4 pulled" in pulled.err
    assert not (second / "build").exists() or not any((second / "build").iterdir())
    assert files_naming(second / "store", str(first)) == []
    pc = next((second / "store").glob("*/prefix/lib/pkgconfig/miniops.pc")).read_text()
    assert f"prefix={second / 'store'}" in pc and str(second / "build") in pc
    record = json.loads(next((second / "store").glob("*/record.json")).read_text())
    assert record["origin"]["cache"] == url and record["origin"]["manifest"].startswith("sha256:")

    # A dependent built on top of pulled entries, and its wheel passes the audit.
    runtime = manifest.parent / "engine" / "src" / "runtime.cpp"
    runtime.write_text(runtime.read_text() + "\n// a change only this home has\n")
    wheel = cli(
        "wheel", "--manifest", manifest, "--home", second, *MINI_ARGS[:-1], "--cache", url,
        "--out", tmp_path / "dist",
    )  # fmt: skip
    assert wheel.code == 0, wheel.err
    assert statuses(second) == {
        "minirt": "hit",
        "miniops": "hit",
        "miniccl": "hit",
        "minilm": "built",
    }
    assert list((tmp_path / "dist").glob("*.whl"))


def test_a_path_compiled_into_code_is_reported_by_file_and_offset_and_not_pushed(
    cli, mini: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    ccl = mini.parent / "ccl"
    source = ccl / "src" / "ccl.cpp"
    source.write_text(
        source.read_text()
        + '\nextern "C" const char *miniccl_built_in(void) { return MINICCL_BUILT_IN; }\n'
    )
    cmake = ccl / "CMakeLists.txt"
    cmake.write_text(
        cmake.read_text()
        + 'target_compile_definitions(miniccl PRIVATE MINICCL_BUILT_IN="${CMAKE_BINARY_DIR}")\n'
    )
    home = tmp_path / "home-a"
    url = registry.url()
    result = build(cli, mini, home, "-c", "miniccl", "-c", "minirt", "--cache", url, "--push")
    assert result.code == 0, result.err
    assert "[minirt] pushed to" in result.err
    assert "[miniccl] not pushed: it names the paths it was built under" in result.err
    place = next(line for line in result.err.splitlines() if "lib/libminiccl.so at byte " in line)
    assert str(home / "build") in place
    cache = {c["name"]: c["cache"] for c in last_report(home)["components"]}
    assert cache["miniccl"]["not_pushed"] == "unrelocatable" and cache["minirt"]["pushed"] == url
    pulled = build(cli, mini, tmp_path / "home-b", "-c", "miniccl", "-c", "minirt", "--cache", url)
    assert statuses(tmp_path / "home-b") == {"minirt": "pulled", "miniccl": "built"}, pulled.err


def push_signed(cli, shared_home: Path, registry: Registry, key: Path | None) -> None:  # type: ignore[no-untyped-def]
    args = ("--cache", registry.url(), "--push", *(("--sign-key", key) if key else ()))
    result = cli("build", *STACK, *args)
    assert result.code == 0, result.err
    assert result.err.count("pushed to") == 4, result.err


def pull(cli, home: Path, *args: str | Path) -> CliResult:  # type: ignore[no-untyped-def]
    return build(cli, MINI_MANIFEST, home, *args)  # type: ignore[no-any-return]


def test_a_signed_entry_is_pulled_and_its_signer_recorded(
    cli, shared_home: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    public = keygen(cli, tmp_path / "key")
    push_signed(cli, shared_home, registry, tmp_path / "key")
    result = pull(cli, tmp_path / "b", "--cache", registry.url(), "--trust", public)
    assert result.code == 0, result.err
    assert statuses(tmp_path / "b") == dict.fromkeys(NAMES, "pulled")
    from builder.cache.signing import key_id, parse_public

    signer = key_id(parse_public(public))
    for record in (tmp_path / "b" / "store").glob("*/record.json"):
        assert json.loads(record.read_text())["origin"]["signer"] == signer
    assert {c["cache"]["signer"] for c in last_report(tmp_path / "b")["components"]} == {signer}


def test_an_unknown_signer_is_refused_and_built_locally(
    cli, shared_home: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    keygen(cli, tmp_path / "key")
    other = keygen(cli, tmp_path / "other")
    push_signed(cli, shared_home, registry, tmp_path / "key")
    result = pull(cli, tmp_path / "b", "--cache", registry.url(), "--trust", other)
    assert result.code == 0, result.err
    assert statuses(tmp_path / "b") == dict.fromkeys(NAMES, "built")
    refusals = [line for line in result.err.splitlines() if "cache: refused" in line]
    assert len(refusals) == 4 and all("which is not trusted" in line for line in refusals)
    for record in (tmp_path / "b" / "store").glob("*/record.json"):
        assert "origin" not in json.loads(record.read_text())


def test_an_unsigned_entry_is_refused_where_a_key_is_required(
    cli, shared_home: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    public = keygen(cli, tmp_path / "key")
    push_signed(cli, shared_home, registry, None)
    result = pull(cli, tmp_path / "b", "--cache", registry.url(), "--trust", public)
    assert result.code == 0, result.err
    assert statuses(tmp_path / "b") == dict.fromkeys(NAMES, "built")
    assert result.err.count("it is unsigned, and the cache's entries must be signed") == 4


def layer_blobs(registry: Registry) -> list[Path]:
    """The registry's stored blobs that are entry layers (zstd frames)."""
    blobs = registry.storage / "docker" / "registry" / "v2" / "blobs"
    return [p for p in blobs.rglob("data") if p.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"]


def test_a_tampered_blob_is_refused_nothing_enters_the_store_and_it_is_built_locally(
    cli, shared_home: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    push_signed(cli, shared_home, registry, None)
    for blob in layer_blobs(registry):
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0xFF
        blob.write_bytes(bytes(data))
    result = pull(cli, tmp_path / "b", "--cache", registry.url())
    assert result.code == 0, result.err
    assert statuses(tmp_path / "b") == dict.fromkeys(NAMES, "built")
    refusals = [line for line in result.err.splitlines() if "cache: refused" in line]
    assert len(refusals) == 4, result.err
    assert all("does not match its digest" in line for line in refusals)
    assert not list((tmp_path / "b" / "store" / ".incoming").iterdir())


def test_a_registry_stopped_mid_pull_means_a_warning_a_local_build_and_no_leftovers(
    cli, shared_home: Path, tmp_path: Path, registry: Registry
) -> None:  # type: ignore[no-untyped-def]
    push_signed(cli, shared_home, registry, None)
    layers = [f"sha256:{blob.parent.name}" for blob in layer_blobs(registry)]
    with CuttingProxy(
        registry.port, cut_after=1000, on_cut=registry.stop, cut_paths=layers
    ) as proxy:
        url = f"oci://127.0.0.1:{proxy.port}/infini/cache"
        result = pull(cli, tmp_path / "b", "--cache", url)
    assert result.code == 0, result.err
    assert proxy.cuts >= 1
    assert "warning: cache unavailable, building locally" in result.err
    # Pulls run side by side: those done before the cut count as pulled, the rest are built.
    done = statuses(tmp_path / "b")
    assert "built" in done.values() and set(done.values()) <= {"built", "pulled"}
    assert not list((tmp_path / "b" / "store" / ".incoming").iterdir())
    required = pull(cli, tmp_path / "c", "--cache", url, "--cache-required")
    assert required.code == 5
    assert "is required" in required.err and "Traceback" not in required.err


def test_two_runners_pushing_the_same_keys_at_once_both_succeed(
    shared_home: Path, tmp_path: Path, registry: Registry
) -> None:
    import shutil

    other = tmp_path / "other-home"
    shutil.copytree(shared_home / "store", other / "store", symlinks=True)
    argv = [sys.executable, "-m", "builder", "build", *STACK]
    argv += ["--cache", registry.url(), "--push"]
    start = threading.Barrier(2)
    results: dict[str, subprocess.CompletedProcess[str]] = {}

    def push(home: Path) -> None:
        start.wait()
        results[str(home)] = subprocess.run(
            [*argv, "--home", str(home)], capture_output=True, text=True, cwd=ROOT, check=False
        )

    threads = [threading.Thread(target=push, args=(h,)) for h in (shared_home, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for done in results.values():
        assert done.returncode == 0, done.stderr
    tags = registry.storage / "docker/registry/v2/repositories/infini/cache/_manifests/tags"
    assert len(list(tags.iterdir())) == 4


def test_credentials_are_never_printed_or_written(
    cli, shared_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    if registry_binary() is None:
        pytest.skip("no registry binary: apt-get install -y docker-registry")
    password = "s3cret-Pa55word-for-the-registry"
    if bcrypt_line("ci", password) is None:
        pytest.skip("neither htpasswd (apache2-utils) nor bcrypt to make a password file")
    reg = Registry(tmp_path / "registry", users={"ci": password}).start()
    try:
        docker = tmp_path / "docker"
        docker.mkdir()
        auth = base64.b64encode(f"ci:{password}".encode()).decode()
        (docker / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
        monkeypatch.setenv("DOCKER_CONFIG", str(docker))
        outputs = [push_and_pull(cli, reg.url(), shared_home, tmp_path / "b")]
        monkeypatch.delenv("DOCKER_CONFIG")
        monkeypatch.setenv("INFINI_STACK_CACHE_USERNAME", "ci")
        monkeypatch.setenv("INFINI_STACK_CACHE_PASSWORD", password)
        outputs.append(push_and_pull(cli, reg.url(), shared_home, tmp_path / "c"))
        memo = ("--manifest", MINI_MANIFEST, "--vendor", "cpu", "--cache", reg.url())
        remembered = cli("build", "--home", tmp_path / "c", *memo)  # leaves a no-op memo
        assert remembered.code == 0 and list((tmp_path / "c" / "cache" / "noop").iterdir())
        monkeypatch.delenv("INFINI_STACK_CACHE_PASSWORD")
        inline = reg.url().replace("oci://", f"oci://ci:{password}@")
        outputs.append(push_and_pull(cli, inline, shared_home, tmp_path / "d"))
        wrong = cli("build", *STACK, "--home", tmp_path / "e", "--cache",
                    reg.url().replace("oci://", "oci://ci:wrong-password-1234@"))  # fmt: skip
        assert wrong.code == 0 and "refused" in wrong.err and "wrong-password" not in wrong.err
    finally:
        reg.stop()
    for text in outputs:
        assert password not in text and auth not in text
    assert f"pulled from {reg.url()}" in outputs[-1]  # the inline URL shown without its user-info
    for root in (shared_home, tmp_path / "b", tmp_path / "c", tmp_path / "d"):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert password.encode() not in data and auth.encode() not in data, path


def test_the_registry_token_flow_gets_a_bearer_token_and_writes_it_nowhere(
    cli, shared_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from tests.tokenauth import TokenService

    if registry_binary() is None:
        pytest.skip("no registry binary: apt-get install -y docker-registry")
    password = "token-flow-password-77"
    tokens = TokenService(tmp_path, {"robot": password}).start()
    reg = Registry(tmp_path / "registry", auth=tokens.registry_auth()).start()
    try:
        monkeypatch.setenv("INFINI_STACK_CACHE_USERNAME", "robot")
        monkeypatch.setenv("INFINI_STACK_CACHE_PASSWORD", password)
        output = push_and_pull(cli, reg.url(), shared_home, tmp_path / "b")
        monkeypatch.setenv("INFINI_STACK_CACHE_PASSWORD", "not-the-password")
        refused = cli(
            "build", *STACK, "--home", tmp_path / "c", "--cache", reg.url(), "-c", "minirt"
        )
    finally:
        reg.stop()
        tokens.stop()
    assert tokens.issued, "the registry never sent the client to the token service"
    assert refused.code == 0 and "token service refused a token" in refused.err, refused.err
    secrets = [password, *tokens.issued]
    for text in (output, refused.err):
        assert not any(s in text for s in secrets)
    for root in (shared_home, tmp_path / "b", tmp_path / "c"):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert not any(s.encode() in data for s in secrets), path


def push_and_pull(cli, url: str, pusher: Path, puller: Path) -> str:  # type: ignore[no-untyped-def]
    pushed = cli("build", *STACK, "--home", pusher, "--cache", url, "--push")
    assert pushed.code == 0, pushed.err
    pulled = cli("build", *STACK, "--home", puller, "--cache", url)
    assert pulled.code == 0, pulled.err
    assert statuses(puller) == dict.fromkeys(NAMES, "pulled"), pulled.err
    report = cli("report", "--home", puller, "--json")
    return pushed.out + pushed.err + pulled.out + pulled.err + report.out + report.err


def test_a_file_cache_is_pushed_pulled_and_left_alone_by_gc(
    cli, shared_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path / 'shared-cache'}"
    (tmp_path / "shared-cache").mkdir()
    pushed = cli("build", *STACK, "--cache", url, "--push")
    assert pushed.code == 0, pushed.err
    before = sorted(p.name for p in (tmp_path / "shared-cache").rglob("*"))
    monkeypatch.setenv("INFINI_STACK_CACHE", url)
    pulled = cli("build", *STACK, "--home", tmp_path / "b")
    assert pulled.code == 0, pulled.err
    assert statuses(tmp_path / "b") == dict.fromkeys(NAMES, "pulled")
    assert cli("gc", "--home", tmp_path / "b").code == 0
    assert sorted(p.name for p in (tmp_path / "shared-cache").rglob("*")) == before


def test_an_unreachable_cache_is_a_warning_and_a_bad_one_a_clear_error(
    cli, shared_home: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from tests.registry import free_port

    down = f"oci://127.0.0.1:{free_port()}/infini/cache"
    result = cli("build", *STACK, "--home", tmp_path / "b", "--cache", down, "-c", "minirt")
    assert result.code == 0, result.err
    assert "warning: cache unavailable, building locally" in result.err
    assert statuses(tmp_path / "b") == {"minirt": "built"}
    for args, message in (
        (("--cache", "https://example.org/x"), "unknown scheme 'https'"),
        (("--cache", "oci://host/Upper"), "is not a repository name"),
        (
            ("--cache", down, "--push", "--sign-key", tmp_path / "nope"),
            "cannot read the signing key",
        ),
        (("--cache", down, "--trust", "ed25519:not-base64!"), "not an ed25519 public key line"),
        (("--cache-required",), "no cache is given"),
    ):
        bad = cli("build", *STACK, "--home", tmp_path / "c", *args)
        assert bad.code == 2, bad.err
        assert message in bad.err and "Traceback" not in bad.err


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites_it(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    public = keygen(cli, tmp_path / "signing.pem")
    assert public.startswith("ed25519:") and len(base64.b64decode(public[8:])) == 32
    assert (tmp_path / "signing.pem").stat().st_mode & 0o777 == 0o600
    again = cli("cache", "keygen", "-o", tmp_path / "signing.pem")
    assert again.code == 2 and "never overwritten" in again.err


def test_an_unknown_component_is_a_usage_error_not_a_traceback(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("build", "--manifest", MINI_MANIFEST, "--vendor", "cpu", "--home", tmp_path,
                 "-c", "nosuch")  # fmt: skip
    assert result.code == 2 and "nosuch" in result.err and "Traceback" not in result.err
