"""`infini-stack smoke`: a wheel installed into a fresh venv, every ELF in it loaded with
immediate binding; an unresolved symbol fails naming it; a vendor runtime this host lacks is
named, not passed over."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.wheelmaker import EXT, Compiler, make_wheel

pytestmark = pytest.mark.integration


def probe_wheel(directory: Path, local: str, members: dict[str, Path]) -> Path:
    """A platform wheel ``probe_pkg-0.1+<local>`` holding ``members`` (arcname -> file)."""
    return make_wheel(directory, members, name="probe_pkg", version=f"0.1+{local}")


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
    ext = Compiler(tmp_path / "build").shared(
        f"_broken{EXT}",
        "extern int infini_missing_symbol(void);\n"
        "void *PyInit__broken(void) {\n"
        "  return (void *)(long)infini_missing_symbol();\n"
        "}\n",
    )
    wheel = probe_wheel(tmp_path, "cpu", {f"probe/_broken{EXT}": ext})
    result = cli("smoke", wheel)
    assert result.code == 6
    assert f"probe/_broken{EXT}: unresolved symbol infini_missing_symbol" in result.out
    assert "smoke failed" in result.out


ONCE = """
#include <Python.h>
static int loads = 0;
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_once", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__once(void) {
  if (loads++) {  /* as numpy's _multiarray_umath */
    PyErr_SetString(PyExc_ImportError, "cannot load module more than once per process");
    return NULL;
  }
  PyObject *package = PyImport_ImportModule("probe");  /* its package, first */
  if (package == NULL) return NULL;
  Py_DECREF(package);
  return PyModule_Create(&def);
}
"""


def test_an_extension_is_imported_as_python_imports_it_once_with_its_package(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    import sysconfig

    include = f"-I{sysconfig.get_paths()['include']}"
    ext = Compiler(tmp_path / "build").shared(f"_once{EXT}", ONCE, flags=[include])
    init = tmp_path / "__init__.py"
    init.write_text("from probe import _once\n", encoding="utf-8")
    wheel = probe_wheel(tmp_path, "cpu", {f"probe/_once{EXT}": ext, "probe/__init__.py": init})
    result = cli("smoke", wheel)
    assert result.code == 0, result.out
    assert f"ok       probe/_once{EXT}" in result.out


def test_unresolved_symbol_in_a_bundled_library_names_it_and_the_library(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cc = Compiler(tmp_path / "build")
    lib = cc.shared(
        "libhalf.so",
        "extern int not_defined_anywhere(void);\n"
        "int half(void) { return not_defined_anywhere(); }\n",
        soname="libhalf.so",
    )
    ext = cc.shared(
        f"_uses{EXT}",
        "extern int half(void);\nvoid *PyInit__uses(void) { return (void *)(long)half(); }\n",
        links=[lib],
        runpath="$ORIGIN/lib",
    )
    wheel = probe_wheel(tmp_path, "cpu", {f"probe/_uses{EXT}": ext, "probe/lib/libhalf.so": lib})
    result = cli("smoke", wheel)
    assert result.code == 6
    assert "probe/lib/libhalf.so: unresolved symbol not_defined_anywhere" in result.out


@pytest.mark.skipif(host_has("libcuda.so.1"), reason="this host has the NVIDIA driver")
def test_smoke_names_the_vendor_runtime_this_host_cannot_supply_instead_of_passing(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cc = Compiler(tmp_path / "build")
    stub = cc.shared(
        "libcuda.so.1", "int cuInit(unsigned f) { return 0; }\n", soname="libcuda.so.1"
    )
    ext = cc.shared(
        f"_gpu{EXT}",
        "extern int cuInit(unsigned);\n"
        "void *PyInit__gpu(void) { return (void *)(long)cuInit(0); }\n",
        links=[stub],
    )
    wheel = probe_wheel(tmp_path, "cu130", {f"probe/_gpu{EXT}": ext})
    result = cli("smoke", wheel)
    assert result.code == 0, result.out  # nothing is wrong with the wheel ...
    assert "NOT VERIFIED" in result.out  # ... but it says what it could not check
    assert (
        f"probe/_gpu{EXT}: needs libcuda.so.1, which the nvidia driver or runtime supplies, "
        "and this host lacks"
    ) in result.out
    strict = cli("smoke", wheel, "--strict", "--json")
    assert strict.code == 6
    (report,) = json.loads(strict.out)
    assert report["unsupplied"] == {"libcuda.so.1": [f"probe/_gpu{EXT}"]}
    assert report["vendor"] == "nvidia" and report["ok"] and not report["complete"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_smoke_names_the_distribution_the_target_interpreter_lacks(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cc = Compiler(tmp_path / "build")
    stub = cc.shared("libtorch.so", "int torch_init(void) { return 0; }\n", soname="libtorch.so")
    ext = cc.shared(
        f"_ext{EXT}",
        "extern int torch_init(void);\n"
        "void *PyInit__ext(void) { return (void *)(long)torch_init(); }\n",
        links=[stub],
    )
    wheel = probe_wheel(tmp_path, "cu130", {f"probe/_ext{EXT}": ext})
    result = cli("smoke", wheel)
    assert result.code == 0, result.out
    assert (
        f"probe/_ext{EXT}: needs libtorch.so, which torch supplies, and the target interpreter "
        "has no torch installed (pip install torch)"
    ) in result.out


def test_a_library_the_vendor_does_not_supply_and_the_host_lacks_is_a_failure(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    cc = Compiler(tmp_path / "build")
    stub = cc.shared(
        "libnowhere.so.3", "int nowhere(void) { return 1; }\n", soname="libnowhere.so.3"
    )
    ext = cc.shared(
        f"_lost{EXT}",
        "extern int nowhere(void);\nvoid *PyInit__lost(void) { return (void *)(long)nowhere(); }\n",
        links=[stub],
    )
    wheel = probe_wheel(tmp_path, "cpu", {f"probe/_lost{EXT}": ext})
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


NEEDS_DEP = """
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) {
  PyObject *dep = PyImport_ImportModule("%(dep)s");  /* as mypyc's modules import librt */
  if (dep == NULL) return NULL;
  Py_DECREF(dep);
  return PyModule_Create(&def);
}
"""


def extension(tmp_path: Path, name: str, dep: str) -> Path:
    import sysconfig

    include = f"-I{sysconfig.get_paths()['include']}"
    source = NEEDS_DEP % {"name": name, "dep": dep}
    return Compiler(tmp_path / "build").shared(f"{name}{EXT}", source, flags=[include])


def test_an_extension_stopping_at_a_requirement_not_installed_is_loaded_and_says_so(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    # The package's compiled __init__ (mypyc's shape) stops at the requirement; so does a
    # module of the package, whose file is then loaded by itself. Both are bound and loaded.
    init = extension(tmp_path, "__init__", "infini_absent_dep")
    mod = extension(tmp_path, "_mod", "infini_absent_dep")
    files = {f"probe/__init__{EXT}": init, f"probe/_mod{EXT}": mod}
    wheel = make_wheel(tmp_path, files, name="probe_pkg", version="0.1+cpu",
                       requires=["infini-absent-dep>=1", "other-extra; extra == 'x'"])  # fmt: skip
    result = cli("smoke", wheel)
    assert result.code == 0, result.out
    for member in (f"probe/__init__{EXT}", f"probe/_mod{EXT}"):
        assert (
            f"ok       {member} (loaded; its initialisation stops short without "
            "infini_absent_dep, not installed here"
        ) in result.out
    assert "smoke passed: 2 file(s)" in result.out


def test_an_extension_stopping_at_a_module_missing_from_its_own_wheel_fails(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    mod = extension(tmp_path, "_mod", "probe._not_shipped")
    wheel = probe_wheel(tmp_path, "cpu", {f"probe/_mod{EXT}": mod})
    result = cli("smoke", wheel)
    assert result.code == 6, result.out
    assert f"FAILED   probe/_mod{EXT}: ModuleNotFoundError: No module named" in result.out


def test_smoke_tests_the_wheel_even_where_the_target_has_that_version_installed(
    tmp_path: Path,
) -> None:
    from builder.checks.smoke import smoke

    ext = Compiler(tmp_path / "build").shared(
        f"_broken{EXT}", "extern int infini_missing_symbol(void);\n"
        "void *PyInit__broken(void) { return (void *)(long)infini_missing_symbol(); }\n",
    )  # fmt: skip
    wheel = probe_wheel(tmp_path / "dist", "cpu", {f"probe/_broken{EXT}": ext})
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", target], check=True)
    python = target / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    subprocess.run([*pip, "--no-index", str(wheel)], check=True)
    result = smoke(wheel, python=str(python))
    assert not result.ok and result.verified == [], result.render()
    assert result.failures[0].detail == "infini_missing_symbol"
