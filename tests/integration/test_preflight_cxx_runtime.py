"""Preflight links a tiny shared C++ library with the configured compilers and refuses one that
would give every library its own C++ runtime (``-static-libstdc++``), for stacks whose libraries
exchange C++ types; the system g++ passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import HAVE_NVCC, MINI

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
]

SYSTEM_GXX = shutil.which("g++") or "g++"


def static_wrapper(path: Path) -> Path:
    """A compiler wrapper like that of an image whose GCC has only libstdc++.a: every shared
    object it links carries a private libstdc++ and libgcc."""
    path.write_text(f'#!/bin/sh\nexec {SYSTEM_GXX} "$@" -static-libstdc++ -static-libgcc\n')
    path.chmod(0o755)
    return path


def stack(tmp_path: Path, runtime: str | None) -> Path:
    """The mini stack, declaring (or not) that its libraries exchange C++ types."""
    root = tmp_path / "mini-stack"
    shutil.copytree(MINI, root)
    manifest = root / "stack.yaml"
    text = "".join(
        line
        for line in manifest.read_text().splitlines(keepends=True)
        if not line.startswith("cxx_runtime:")
    )
    if runtime is not None:
        text = text.replace(
            "build_type: Release\n", f"build_type: Release\ncxx_runtime: {runtime}\n"
        )
    manifest.write_text(text)
    return manifest


def row(result_out: str, name: str) -> dict[str, object]:
    data = json.loads(result_out)
    (found,) = (r for r in data["providers"] if r["name"] == name)
    return found  # type: ignore[no-any-return]


def test_a_compiler_linking_libstdcxx_statically_fails_preflight_naming_what_it_linked(
    tmp_path: Path, home: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    wrapper = static_wrapper(tmp_path / "g++-static")
    monkeypatch.setenv("CXX", str(wrapper))
    result = cli("preflight", "--manifest", stack(tmp_path, "shared"), "--vendor", "cpu")
    assert result.code == 3, result.out + result.err
    assert "cxx-runtime: wrong version, wanted libstdc++.so.6" in result.err
    assert f"found private at {wrapper}" in result.err
    assert "g++-static links a library that defines" in result.err
    assert "std::locale" in result.err and "needs no libstdc++.so.6" in result.err
    assert "private copy of libgcc's unwinder" in result.err
    assert "hint: use a compiler that links the shared libstdc++.so.6" in result.err
    assert "Traceback" not in result.err


def test_the_system_compiler_passes_and_the_probe_library_needs_libstdcxx(
    tmp_path: Path, home: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CXX", SYSTEM_GXX)
    result = cli("preflight", "--manifest", stack(tmp_path, "shared"), "--vendor", "cpu", "--json")
    assert result.code == 0, result.err
    found = row(result.out, "cxx-runtime")
    assert found["status"] == "found" and found["version"] == "shared"
    assert any("libstdc++.so.6" in d for d in found["details"])  # type: ignore[attr-defined]


def test_a_stack_that_exchanges_no_cxx_types_only_notes_a_private_runtime(
    tmp_path: Path, home: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CXX", str(static_wrapper(tmp_path / "g++-static")))
    result = cli("preflight", "--manifest", stack(tmp_path, None), "--vendor", "cpu", "--json")
    assert result.code == 0, result.err
    found = row(result.out, "cxx-runtime")
    assert found["status"] == "found" and found["version"] == "private"
    assert found["wanted"] == "any"


def test_the_probe_is_cached_with_the_host_facts_and_redone_when_the_compiler_changes(
    tmp_path: Path, home: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    wrapper = static_wrapper(tmp_path / "g++-static")
    monkeypatch.setenv("CXX", str(wrapper))
    manifest = stack(tmp_path, "shared")
    assert cli("preflight", "--manifest", manifest, "--vendor", "cpu").code == 3
    memo = home / "cache" / "cxx-runtime.json"
    data = json.loads(memo.read_text())
    (key,) = data
    assert key.startswith(str(wrapper))
    # The cached finding is what the next preflight reports: no second link.
    data[key][1]["shared"] = True
    memo.write_text(json.dumps(data))
    assert cli("preflight", "--manifest", manifest, "--vendor", "cpu").code == 0
    # A changed compiler file is probed again.
    wrapper.write_text(wrapper.read_text() + "# edited\n")
    assert cli("preflight", "--manifest", manifest, "--vendor", "cpu").code == 3


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_a_cuda_host_compiler_linking_libstdcxx_statically_fails_preflight(
    tmp_path: Path, home: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CXX", SYSTEM_GXX)
    monkeypatch.setenv("CUDAHOSTCXX", str(static_wrapper(tmp_path / "g++-static")))
    result = cli(
        "preflight", "--manifest", stack(tmp_path, "shared"), "--vendor", "nvidia", "--json"
    )
    found = row(result.out, "cuda-host-runtime")
    assert found["status"] == "wrong version", found
    assert found["version"] == "private"
    assert any("nvcc links a library that defines" in d for d in found["details"])  # type: ignore[attr-defined]
    assert row(result.out, "cxx-runtime")["version"] == "shared"
    monkeypatch.setenv("CUDAHOSTCXX", SYSTEM_GXX)
    again = cli(
        "preflight", "--manifest", stack(tmp_path / "b", "shared"), "--vendor", "nvidia", "--json"
    )
    assert row(again.out, "cuda-host-runtime")["version"] == "shared"
