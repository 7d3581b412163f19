"""Where the audit draws the line on private C++ runtimes, on wheels built here with g++.

- two libraries on the shared ``libstdc++.so.6`` that pass a ``std::string``: pass;
- an extension with a private, hidden copy (``-static-libstdc++ -static-libgcc
  -Wl,--exclude-libs,ALL``) whose C++ stays inside it: pass, reported as isolated;
- two libraries, each with its own copy (``-static-libstdc++``), one calling the other's
  ``std::string`` function: a violation, plain or hidden; and the hidden pair really breaks:
  an exception thrown by one and caught by the other aborts the process (the catching side's
  personality routine runs its own unwinder's code on the throwing side's unwind context);
- a private copy that takes C++ symbols from torch's ``libc10.so`` (a stand-in in a site
  directory, resolved through the vendor policy): a violation naming torch;
- a C library whose loops gcc vectorised into calls to glibc's libmvec (``_ZGVbN2v_cos``:
  "_Z" names of the vector function ABI, as soundfile's libsndfile has): no C++ at all.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.wheelmaker import EXT, make_wheel
from wheels.audit import audit_wheel
from wheels.audit_report import ElfReport, Finding, WheelAudit, render_text
from wheels.policy import load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
]

PRIVATE = ("-static-libstdc++", "-static-libgcc")
HIDDEN = (*PRIVATE, "-Wl,--exclude-libs,ALL")
PRODUCER = """
#include <stdexcept>
#include <string>
std::string a_name(const std::string& s) { return "a:" + s; }
void a_throw(const std::string& what) { throw std::runtime_error(what); }
"""
CONSUMER = """
#include <cstdio>
#include <stdexcept>
#include <string>
std::string a_name(const std::string& s);
void a_throw(const std::string& what);
extern "C" int b_run() {
  std::printf("%s\\n", a_name("x").c_str());
  try { a_throw("boom"); }
  catch (const std::exception& e) { std::printf("caught %s\\n", e.what()); }
  return 0;
}
"""
ISOLATED = """
#include <Python.h>
#include <sstream>
#include <stdexcept>
static long digits(long n) {
  try { std::ostringstream os; os << n; if (n > 99) throw std::runtime_error(os.str());
        return 0; }
  catch (const std::exception& e) { return (long)std::string(e.what()).size(); }
}
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_iso", NULL, -1, NULL};
extern "C" __attribute__((visibility("default"))) PyObject *PyInit__iso(void) {
  PyObject *m = PyModule_Create(&def);
  if (m) PyModule_AddIntConstant(m, "answer", digits(12345));
  return m;
}
"""
TORCH_USER = """
#include <string>
namespace c10 { std::string demangle(const char *name); }
extern "C" __attribute__((visibility("default"))) int uses_c10() {
  return (int)c10::demangle("x").size();
}
"""


def gxx(
    out: Path,
    name: str,
    source: str,
    flags: Sequence[str] = (),
    links: Sequence[Path] = (),
    soname: str | None = None,
    runpath: str = "$ORIGIN",
) -> Path:
    """A shared C++ library ``name`` built by g++ with ``flags``, linked against ``links``."""
    work = out / name.replace(".", "_")
    work.mkdir(parents=True)
    (work / "src.cpp").write_text(source)
    argv = ["g++", "-shared", "-fPIC", "-O1", "-o", str(work / name), str(work / "src.cpp")]
    argv += [f"-Wl,-soname,{soname}"] if soname else []
    argv += [f"-Wl,--enable-new-dtags,-rpath,{runpath}", *map(str, links), *flags]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    return work / name


def pair(out: Path, flags: Sequence[str]) -> tuple[Path, Path]:
    """liba (a std::string function, one that throws) and libb, which calls both."""
    a = gxx(out, "liba.so", PRODUCER, flags, soname="liba.so")
    return a, gxx(out, "libb.so", CONSUMER, flags, links=[a], soname="libb.so")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cxx")
    out: dict[str, Path] = {}
    for name, flags in (("shared", ()), ("private", PRIVATE), ("hidden", HIDDEN)):
        a, b = pair(root / name, flags)
        files: dict[str, bytes | Path] = {"demo/__init__.py": b"", "demo/lib/liba.so": a,
                                          "demo/lib/libb.so": b}  # fmt: skip
        out[name] = make_wheel(root / f"{name}-wheel", files, name=f"cxx_{name}")
    include = f"-I{sysconfig.get_paths()['include']}"
    iso = gxx(root / "iso", f"_iso{EXT}", ISOLATED, (*HIDDEN, "-fvisibility=hidden", include))
    out["isolated_ext"] = iso
    out["isolated"] = make_wheel(
        root / "isolated-wheel", {"demo/__init__.py": b"", f"demo/{iso.name}": iso}, name="iso"
    )
    return out


def audit(path: Path) -> WheelAudit:
    return audit_wheel(path, load_vendor_policy("cpu"))


def elf(result: WheelAudit, member: str) -> ElfReport:
    return next(e for e in result.elfs if e.member == member)


def cxx_violations(result: WheelAudit) -> dict[str | None, Finding]:
    return {f.member: f for f in result.violations if f.code == "private-cxx-runtime"}


def test_libraries_on_the_shared_runtime_exchanging_a_std_string_pass(
    wheels: dict[str, Path],
) -> None:
    result = audit(wheels["shared"])
    assert result.ok and not cxx_violations(result), render_text([result])
    for member in ("demo/lib/liba.so", "demo/lib/libb.so"):
        assert elf(result, member).cxx_runtime == "shared"
    assert "      C++ runtime: shared" in render_text([result])


def test_an_extension_with_a_hidden_private_copy_that_exchanges_nothing_passes(
    wheels: dict[str, Path],
) -> None:
    result = audit(wheels["isolated"])
    assert result.ok and not result.warnings, render_text([result])
    ext = elf(result, f"demo/_iso{EXT}")
    assert "libstdc++.so.6" not in ext.needed
    assert ext.cxx_runtime == "private (isolated)"
    assert "      C++ runtime: private (isolated)" in render_text([result])
    # and it works: its exceptions and streams never leave it
    where = wheels["isolated_ext"].parent
    code = f"import sys; sys.path.insert(0, {str(where)!r}); import _iso; print(_iso.answer)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout.strip()) == (0, "5"), run.stderr


@pytest.mark.parametrize("name", ["private", "hidden"])
def test_libraries_with_their_own_copies_exchanging_a_std_string_are_a_violation(
    wheels: dict[str, Path], name: str
) -> None:
    result = audit(wheels[name])
    found = cxx_violations(result)
    assert set(found) == {"demo/lib/liba.so", "demo/lib/libb.so"}, render_text([result])
    a, b = found["demo/lib/liba.so"].message, found["demo/lib/libb.so"].message
    assert "needs no libstdc++.so.6: a private" in a and "needs no libstdc++.so.6" in b
    assert "demo/lib/libb.so takes" in a and "C++ symbols from it (_Z6a_name" in a
    assert "it takes" in b and "from demo/lib/liba.so (_Z6a_name" in b
    for what in ("exception", "locale", "RTTI", "typeid", "libstdc++.so.6"):
        assert what in a, what
    assert elf(result, "demo/lib/libb.so").cxx_runtime == (
        "private (crossed by C++ symbols: demo/lib/liba.so)"
    )


def call_b_run(wheel: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """Unpack ``wheel`` into ``site`` (as pip installs it), load its libb and call b_run."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    library = site / "demo" / "lib" / "libb.so"
    code = f"import ctypes; print('returned', ctypes.CDLL({str(library)!r}).b_run(), flush=True)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_an_exception_across_two_hidden_copies_aborts_and_across_the_shared_one_is_caught(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    shared = call_b_run(wheels["shared"], tmp_path / "shared")
    assert shared.returncode == 0 and "caught boom" in shared.stdout, shared.stderr
    hidden = call_b_run(wheels["hidden"], tmp_path / "hidden")
    assert hidden.returncode == -6, (hidden.returncode, hidden.stdout, hidden.stderr)  # SIGABRT
    assert "returned" not in hidden.stdout


@pytest.mark.usefixtures("without_host_site_packages")
def test_a_private_copy_taking_symbols_from_torch_is_a_violation_naming_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    c10 = gxx(tmp_path / "c10", "libc10.so", "#include <string>\nnamespace c10 { std::string "
              "demangle(const char *n) { return n; } }\n", soname="libc10.so")  # fmt: skip
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(c10, site / "torch" / "lib")
    user = gxx(tmp_path / "user", "libuser.so", TORCH_USER, (*HIDDEN, "-fvisibility=hidden"),
               links=[c10], soname="libuser.so", runpath="$ORIGIN/../../torch/lib")  # fmt: skip
    path = make_wheel(tmp_path / "w", {"demo/__init__.py": b"", "demo/lib/libuser.so": user},
                      requires=["torch"])  # fmt: skip
    unread = cxx_violations(audit(path))["demo/lib/libuser.so"].message
    assert "from libc10.so (torch), not readable here (_ZN3c108demangle" in unread
    monkeypatch.syspath_prepend(str(site))
    read = cxx_violations(audit(path))["demo/lib/libuser.so"].message
    assert "it takes 1 C++ symbol from libc10.so (torch) (_ZN3c108demangle" in read


VECTORISED = """
#include <math.h>
void cosines(double *x, int n) { for (int i = 0; i < n; i++) x[i] = cos(x[i]); }
"""


def test_a_c_library_calling_libmvec_vector_functions_uses_no_cxx_runtime(tmp_path: Path) -> None:
    work = tmp_path / "vec"
    work.mkdir()
    (work / "vec.c").write_text(VECTORISED)
    lib = work / "libvec.so"
    argv = ["gcc", "-shared", "-fPIC", "-O3", "-ffast-math", "-o", str(lib), str(work / "vec.c")]
    subprocess.run([*argv, "-lm"], check=True, capture_output=True, text=True)
    path = make_wheel(tmp_path / "w", {"demo/__init__.py": b"", "demo/libvec.so": lib})
    result = audit(path)
    report = elf(result, "demo/libvec.so")
    assert "libmvec.so.1" in report.needed  # (gcc did call the vector variant of cos)
    assert report.cxx_runtime is None and not cxx_violations(result), render_text([result])
    assert "C++ runtime" not in render_text([result])
