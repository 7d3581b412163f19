"""Verdicts on the wheel shapes PyPI carries beyond the plain manylinux extension, each built
here with gcc: a musllinux extension (against a stand-in of musl's C library: there is no
musl on this host), a static executable tagged for both libcs, a PEP 600 tag between
auditwheel's policies, an extension in a namespace package, and the C++ runtime that
``auditwheel repair`` grafts into ``.libs``."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.wheelmaker import Compiler, make_wheel
from wheels.audit import audit_wheel, render_text
from wheels.audit_report import WheelAudit
from wheels.policy import load_vendor_policy

pytestmark = pytest.mark.integration
CPU = load_vendor_policy("cpu")
PY = f"-I{sysconfig.get_paths()['include']}"
MUSL_EXT = "_speed.cpython-311-x86_64-linux-musl.so"
MODULE = """
#include <Python.h>
#include <string.h>
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{
  char buf[8];
  memcpy(buf, "abcdefg", 8);
  return PyModule_Create(&def);
}}
"""


def audit(wheel: Path) -> WheelAudit:
    return audit_wheel(wheel, CPU, workers=1)


def codes(result: WheelAudit) -> list[str]:
    return sorted(f.code for f in result.findings)


def test_a_musllinux_extension_binds_nothing_against_glibc_standin_musl(tmp_path: Path) -> None:
    build = Compiler(tmp_path / "build")
    libc = build.shared(
        "libc.musl-x86_64.so.1",
        "void *memcpy(void *d, const void *s, unsigned long n) { return d; }\n",
        soname="libc.musl-x86_64.so.1",
        flags=["-nostdlib"],
    )
    ext = build.shared(
        MUSL_EXT,
        MODULE.format(name="_speed"),
        links=[libc],
        flags=[PY, "-nostdlib", "-fno-builtin", "-fno-stack-protector"],
    )
    wheel = make_wheel(
        tmp_path,
        {"speed/__init__.py": b"", f"speed/{MUSL_EXT}": ext},
        name="speed",
        tag="cp311-cp311-musllinux_1_2_x86_64",
    )
    result = audit(wheel)
    assert result.ok, render_text([result])
    assert codes(result) == ["musl-unverified"]  # said once, never bound against libc.so.6
    (elf,) = result.elfs
    assert [(n.soname, n.kind) for n in elf.needs] == [("libc.musl-x86_64.so.1", "system")]
    assert result.tag == "musllinux_1_1_x86_64"


def test_a_static_executable_fits_both_libc_tags(tmp_path: Path) -> None:
    source = tmp_path / "tool.c"
    source.write_text("int main(void) { return 0; }\n", encoding="utf-8")
    tool = tmp_path / "tool"
    subprocess.run(["gcc", "-static", "-o", str(tool), str(source)], check=True)
    tag = "py3-none-manylinux_2_5_x86_64.manylinux1_x86_64.musllinux_1_1_x86_64"
    wheel = make_wheel(tmp_path / "w", {"tool-1.0.data/scripts/tool": tool}, name="tool", tag=tag)
    result = audit(wheel)
    assert not result.violations, render_text([result])
    assert result.auditwheel_tag == "manylinux_2_5_x86_64"


GETRANDOM = """
#include <stddef.h>
#include <sys/types.h>
__asm__(".symver getrandom,getrandom@GLIBC_2.25");
extern ssize_t getrandom(void *buf, size_t n, unsigned flags);
long draw(void) { long x = 0; getrandom(&x, sizeof x, 0); return x; }
"""


@pytest.mark.parametrize(("declared", "fits"), [("2_25", True), ("2_24", False)])
def test_a_pep600_tag_between_auditwheels_policies_is_right_by_its_glibc_version(
    tmp_path: Path, declared: str, fits: bool
) -> None:
    lib = Compiler(tmp_path / "build").shared("libdraw.so", GETRANDOM, soname="libdraw.so")
    tag = f"py3-none-manylinux_{declared}_x86_64"
    result = audit(make_wheel(tmp_path / "w", {"draw/libdraw.so": lib}, name="draw", tag=tag))
    assert result.tag == "manylinux_2_25_x86_64"
    assert result.auditwheel_tag != result.tag  # auditwheel has no 2_25 policy: it rounds up
    assert result.ok is fits, render_text([result])
    if not fits:
        (finding,) = result.violations
        assert finding.message.endswith("symbol version GLIBC_2.25 needs glibc 2.25 or newer")


def test_an_extension_in_a_namespace_package_is_an_extension(tmp_path: Path) -> None:
    ext = Compiler(tmp_path / "build").shared(
        "_lapack.so", MODULE.format(name="_lapack"), flags=[PY]
    )
    wheel = make_wheel(tmp_path, {"nspkg/cpu/_lapack.so": ext}, name="nspkg")
    result = audit(wheel)
    assert result.ok, render_text([result])
    (elf,) = result.elfs
    assert elf.kind == "extension" and elf.symbols.missing == ()


def test_the_cxx_runtime_grafted_into_libs_is_the_wheels_shared_one(tmp_path: Path) -> None:
    build = Compiler(tmp_path / "build")
    name = "libstdc++-0123abcd.so.6.0.32"
    runtime = build.shared(
        name,
        "void __cxa_throw(void) {}\nvoid *_Znwm(unsigned long n) { return 0; }\n",
        soname=name,
    )
    user = build.shared(
        "libuser.so",
        "extern void *_Znwm(unsigned long);\nvoid *_Z4makev(void) { return _Znwm(8); }\n",
        soname="libuser.so",
        links=[runtime],
        runpath="$ORIGIN/../grafted.libs",
    )
    members = {f"grafted.libs/{name}": runtime, "grafted/libuser.so": user}
    result = audit(make_wheel(tmp_path, members, name="grafted"))
    assert "private-cxx-runtime" not in codes(result), render_text([result])
    labels = {e.member: e.cxx_runtime for e in result.elfs}
    assert labels[f"grafted.libs/{name}"].startswith("shared (the wheel's one copy")
