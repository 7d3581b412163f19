"""`infini-stack smoke`: a wheel installed into a fresh venv, every ELF in it loaded with
immediate binding; an unresolved symbol fails naming it; a vendor runtime this host lacks is
named, not passed over."""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
EXT = f".cpython-{sys.version_info.major}{sys.version_info.minor}-x86_64-linux-gnu.so"


def compile_so(out: Path, source: str, *flags: str) -> Path:
    """A shared object from C ``source`` (no Python headers needed)."""
    c = out.with_suffix(".c") if out.suffix == ".so" else out.parent / (out.name + ".c")
    c.write_text(source)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(out), str(c), *flags], check=True, capture_output=True
    )
    return out


def digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    directory: Path, local: str, members: dict[str, bytes], name: str = "probe_pkg"
) -> Path:
    """A minimal platform wheel holding ``members`` (arcname -> bytes)."""
    version = f"0.1+{local}"
    dist = f"{name}-{version}.dist-info"
    files = dict(members)
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    ).encode()
    files[f"{dist}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        f"Tag: {TAG}-{TAG}-linux_x86_64\n"
    ).encode()
    record = [f"{a},sha256={digest(d)},{len(d)}" for a, d in files.items()]
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    wheel = directory / f"{name}-{version}-{TAG}-{TAG}-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            info = zipfile.ZipInfo(arcname)
            info.external_attr = (0o100755 if arcname.endswith(".so") else 0o100644) << 16
            zf.writestr(info, data)
    return wheel


def host_has(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


@pytest.fixture
def mini_wheel(shared_home: Path, mini: Path, tmp_path: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    result = cli("wheel", "--manifest", mini, "--vendor", "cpu", "--out", tmp_path / "dist")
    assert result.code == 0, result.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return wheel


def test_smoke_loads_every_elf_of_the_mini_stack_wheel_with_immediate_binding(
    mini_wheel: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("smoke", mini_wheel, "--json")
    assert result.code == 0, result.err
    (report,) = json.loads(result.out)
    assert report["ok"] and report["complete"]
    assert sorted(report["verified"]) == [
        f"minicore/_minicore{EXT}",
        "minicore/lib/libminiccl.so",
        "minicore/lib/libminicore_runtime.so",
        "minicore/lib/libminiops.so",
        "minicore/lib/libminirt.so",
    ]
    assert report["vendor"] == "cpu"  # read from the wheel's local version


def test_smoke_fails_naming_a_symbol_nothing_provides(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    ext = compile_so(
        tmp_path / f"_broken{EXT}",
        "extern int infini_missing_symbol(void);\n"
        "void *PyInit__broken(void) {\n"
        "  return (void *)(long)infini_missing_symbol();\n"
        "}\n",
    )
    wheel = make_wheel(tmp_path, "cpu", {f"probe/_broken{EXT}": ext.read_bytes()})
    result = cli("smoke", wheel)
    assert result.code == 6
    assert f"probe/_broken{EXT}: unresolved symbol infini_missing_symbol" in result.out
    assert "smoke failed" in result.out


def test_unresolved_symbol_in_a_bundled_library_names_it_and_the_library(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    lib = compile_so(
        tmp_path / "libhalf.so",
        "extern int not_defined_anywhere(void);\n"
        "int half(void) { return not_defined_anywhere(); }\n",
        "-Wl,-soname,libhalf.so",
    )
    ext = compile_so(
        tmp_path / f"_uses{EXT}",
        "extern int half(void);\nvoid *PyInit__uses(void) { return (void *)(long)half(); }\n",
        f"-L{tmp_path}",
        "-lhalf",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    wheel = make_wheel(
        tmp_path,
        "cpu",
        {f"probe/_uses{EXT}": ext.read_bytes(), "probe/lib/libhalf.so": lib.read_bytes()},
    )
    result = cli("smoke", wheel)
    assert result.code == 6
    assert "probe/lib/libhalf.so: unresolved symbol not_defined_anywhere" in result.out


@pytest.mark.skipif(host_has("libcuda.so.1"), reason="this host has the NVIDIA driver")
def test_smoke_names_the_vendor_runtime_this_host_cannot_supply_instead_of_passing(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stub = tmp_path / "stub"
    stub.mkdir()
    compile_so(
        stub / "libcuda.so.1", "int cuInit(unsigned f) { return 0; }\n", "-Wl,-soname,libcuda.so.1"
    )
    ext = compile_so(
        tmp_path / f"_gpu{EXT}",
        "extern int cuInit(unsigned);\n"
        "void *PyInit__gpu(void) { return (void *)(long)cuInit(0); }\n",
        f"-L{stub}",
        "-l:libcuda.so.1",
    )
    wheel = make_wheel(tmp_path, "cu130", {f"probe/_gpu{EXT}": ext.read_bytes()})
    result = cli("smoke", wheel)
    assert result.code == 0, result.out  # nothing is wrong with the wheel ...
    assert "NOT VERIFIED" in result.out  # ... but it says what it could not check
    assert f"probe/_gpu{EXT}: needs libcuda.so.1, which this host cannot supply" in result.out
    strict = cli("smoke", wheel, "--strict", "--json")
    assert strict.code == 6
    (report,) = json.loads(strict.out)
    assert report["unsupplied"] == {"libcuda.so.1": [f"probe/_gpu{EXT}"]}
    assert report["vendor"] == "nvidia" and report["ok"] and not report["complete"]


def test_a_library_the_vendor_does_not_supply_and_the_host_lacks_is_a_failure(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    stub = tmp_path / "stub"
    stub.mkdir()
    compile_so(
        stub / "libnowhere.so.3", "int nowhere(void) { return 1; }\n", "-Wl,-soname,libnowhere.so.3"
    )
    ext = compile_so(
        tmp_path / f"_lost{EXT}",
        "extern int nowhere(void);\nvoid *PyInit__lost(void) { return (void *)(long)nowhere(); }\n",
        f"-L{stub}",
        "-l:libnowhere.so.3",
    )
    wheel = make_wheel(tmp_path, "cpu", {f"probe/_lost{EXT}": ext.read_bytes()})
    result = cli("smoke", wheel)
    assert result.code == 6
    assert (
        f"probe/_lost{EXT}: needs libnowhere.so.3, which neither the wheel nor this host has"
    ) in result.out


def test_smoke_runs_outside_the_source_tree(
    mini_wheel: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    # A stale, broken `minicore` in the working directory must not be what gets loaded.
    decoy = tmp_path / "cwd" / "minicore"
    decoy.mkdir(parents=True)
    (decoy / f"_minicore{EXT}").write_bytes(b"not an ELF file")
    shutil.copy(mini_wheel, tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    result = cli("smoke", mini_wheel.name)
    assert result.code == 0, result.out + result.err
