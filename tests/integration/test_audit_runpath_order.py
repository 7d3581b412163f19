"""The RUNPATH order rule, the stale-metadata rule and the supplier of a need, on wheels built
here with gcc in the shapes of real ones: jaxlib 0.12 (a stale entry before the one that
resolves a need), tensorflow-cpu 2.21 (stale entries after it), catboost (absolute build
directories, needs in glibc), a locally built wrapt (RUNPATH into the build machine's pyenv),
ray (WHEEL's Tag against the file name), PyQt6 (its Qt libraries from PyQt6-Qt6, through
``$ORIGIN/Qt6/lib``) and torchvision (CUDA libraries that arrive through torch)."""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.wheelmaker import EXT, TAG, Compiler, make_wheel
from wheels.audit import audit_wheel, render_text
from wheels.audit_report import WheelAudit
from wheels.policy import load_vendor_policy

pytestmark = pytest.mark.integration
CPU = load_vendor_policy("cpu")
PY = f"-I{sysconfig.get_paths()['include']}"
MODULE = """
#include <Python.h>
{decl}
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{
  {call}
  return PyModule_Create(&def);
}}
"""
RULE = "(RUNPATH order rule, docs/audit-verdicts.md)"


def audit(wheel: Path) -> WheelAudit:
    return audit_wheel(wheel, CPU, workers=1)


def extension(
    cc: Compiler, name: str, runpath: str | None, links: Sequence[Path], uses: Sequence[str] = ()
) -> Path:
    """An extension module ``name`` calling ``uses`` (functions of ``links``)."""
    decl = "".join(f"extern int {u}(void);\n" for u in uses)
    call = "".join(f"{u}();\n" for u in uses)
    source = MODULE.format(name=name, decl=decl, call=call)
    return cc.shared(name + EXT, source, links=links, runpath=runpath, flags=[PY])


def library(cc: Compiler, soname: str, function: str) -> Path:
    return cc.shared(soname, f"int {function}(void) {{ return 1; }}\n", soname=soname)


def runpath_findings(result: WheelAudit) -> tuple[list[str], list[str]]:
    return (
        [f.message for f in result.violations if f.code == "runpath"],
        [f.message for f in result.warnings if f.code == "runpath"],
    )


def test_a_stale_entry_searched_before_the_one_that_resolves_a_need_is_a_violation(
    tmp_path: Path,
) -> None:
    """jaxlib 0.12.0.1: ``$ORIGIN/../../jaxlib`` comes before ``$ORIGIN/``, where
    ``libjax_common.so`` is."""
    cc = Compiler(tmp_path / "build")
    common = library(cc, "libjax_common.so", "jax_common")
    ext = extension(cc, "_hlo", "$ORIGIN/../../jaxdemo:$ORIGIN/", [common], ["jax_common"])
    members = {"jaxdemo/__init__.py": b"", f"jaxdemo/_hlo{EXT}": ext}
    members["jaxdemo/libjax_common.so"] = common
    result = audit(make_wheel(tmp_path, members, name="jaxdemo"))
    violations, warnings = runpath_findings(result)
    assert not result.ok and not warnings, render_text([result])
    (message,) = violations
    assert message.startswith(
        "RUNPATH entry 1 '$ORIGIN/../../jaxdemo' leads out of the install tree (to ../jaxdemo "
        "from site-packages); the loader searches it for libjax_common.so before entry 2 "
        "'$ORIGIN/', which resolves it"
    )
    assert "`pip install --target /tmp/t`, it is /tmp/jaxdemo" in message
    assert message.endswith(RULE)


def test_stale_entries_after_every_resolving_one_are_warnings(tmp_path: Path) -> None:
    """tensorflow-cpu 2.21.0's shape: ``$ORIGIN/`` first, stale Bazel entries after it, and
    nothing needed that the system's directories resolve (the extension needs libc alone,
    which the interpreter has loaded)."""
    cc = Compiler(tmp_path / "build")
    framework = library(cc, "libtf_framework.so.2", "tf_framework")
    runpath = "$ORIGIN/:$ORIGIN/../../_solib_x86_64/_U_S_Stf:$ORIGIN/../../../../"
    ext = extension(cc, "_pywrap", runpath, [framework], ["tf_framework"])
    members = {"tfdemo/__init__.py": b"", f"tfdemo/_pywrap{EXT}": ext}
    members["tfdemo/libtf_framework.so.2"] = framework
    result = audit(make_wheel(tmp_path, members, name="tfdemo"))
    violations, warnings = runpath_findings(result)
    assert result.ok and not violations, render_text([result])
    assert len(warnings) == 2
    assert warnings[0].startswith("RUNPATH entry 2 '$ORIGIN/../../_solib_x86_64/_U_S_Stf' leads")
    assert (
        "comes after every entry that resolves a need of this file (libtf_framework.so.2)"
        in (warnings[0])
    )
    assert all(w.endswith(RULE) for w in warnings)


def test_absolute_build_directories_searched_before_the_system_are_a_violation(
    tmp_path: Path,
) -> None:
    """catboost: RUNPATH only absolute ``/home/runner/...`` directories, every need in glibc;
    libdl.so.2 is no library the interpreter has loaded, so the loader searches them for it
    before the system's directories."""
    cc = Compiler(tmp_path / "build")
    runpath = "/home/runner/.conan2/p/b/zlib/p/lib:/home/runner/build/lib"
    ext = cc.shared(
        "_catboost" + EXT,
        MODULE.format(name="_catboost", decl="", call=""),
        runpath=runpath,
        flags=[PY, "-l:libdl.so.2"],
    )
    result = audit(make_wheel(tmp_path, {f"cbdemo/_catboost{EXT}": ext, "cbdemo/__init__.py": b""}))
    violations, _ = runpath_findings(result)
    assert len(violations) == 2, render_text([result])
    assert violations[0].startswith(
        "RUNPATH entry 1 '/home/runner/.conan2/p/b/zlib/p/lib' is an absolute directory "
        "outside the wheel (a build or toolkit directory?); the loader searches it for "
        "libdl.so.2 before the system's library directories"
    )
    assert "on a machine with a user named runner, that user can create it" in violations[0]
    assert all(v.endswith(RULE) for v in violations)


def test_a_build_machines_pyenv_in_runpath_reached_by_no_need_is_a_warning(
    tmp_path: Path,
) -> None:
    """A locally built wrapt: RUNPATH into the build machine's pyenv, needing only libc."""
    cc = Compiler(tmp_path / "build")
    runpath = "/root/.pyenv/versions/3.11.7/lib"
    ext = extension(cc, "_wrappers", runpath, [])
    wheel = make_wheel(tmp_path, {f"wrapdemo/_wrappers{EXT}": ext, "wrapdemo/__init__.py": b""})
    result = audit(wheel)
    violations, warnings = runpath_findings(result)
    assert result.ok and not violations, render_text([result])
    (message,) = warnings
    assert "no need of this file is searched for there" in message and message.endswith(RULE)


def test_wheel_tag_lines_against_the_file_name_are_stale_metadata_a_warning(
    tmp_path: Path,
) -> None:
    """ray: WHEEL says ``linux_x86_64``, the file name ``manylinux2014_x86_64``."""
    cc = Compiler(tmp_path / "build")
    ext = extension(cc, "_raylet", None, [])
    wheel = make_wheel(
        tmp_path,
        {f"raydemo/_raylet{EXT}": ext, "raydemo/__init__.py": b""},
        tag=f"{TAG}-{TAG}-manylinux2014_x86_64",
        wheel_tags=[f"{TAG}-{TAG}-linux_x86_64"],
    )
    result = audit(wheel)
    assert result.ok, render_text([result])
    (finding,) = [f for f in result.warnings if f.code == "wheel-tag"]
    assert finding.message.startswith(
        "Tag lines (linux_x86_64) disagree with the file name (manylinux2014_x86_64)"
    )
    assert finding.message.endswith("(stale-metadata rule, docs/audit-verdicts.md)")


def install(site: Path, name: str, files: dict[str, Path], requires: Sequence[str] = ()) -> None:
    """``name`` installed into ``site`` as pip leaves it: its files and a .dist-info with
    METADATA and RECORD."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    meta = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n\n", encoding="utf-8")
    for path, source in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(source.read_bytes())
    record = [f"{p},," for p in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")


@pytest.fixture
def pyqt(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A PyQt6-shaped wheel (``qtdemo``: Requires-Dist qtdemo-qt6, RUNPATH ``$ORIGIN/Qt6/lib``,
    needing ``libQt6Core.so.6`` and ``libxkbcommon.so.0``), the Qt library, a site dir."""
    cc = Compiler(tmp_path / "build")
    core = library(cc, "libQt6Core.so.6", "qt_core")
    xkb = library(cc, "libxkbcommon.so.0", "xkb_keymap")
    ext = extension(cc, "QtCore", "$ORIGIN/Qt6/lib", [core, xkb], ["qt_core", "xkb_keymap"])
    members = {"qtdemo/__init__.py": b"", f"qtdemo/QtCore{EXT}": ext}
    tag = f"{TAG}-{TAG}-manylinux_2_17_x86_64"
    wheel = make_wheel(tmp_path / "w", members, name="qtdemo", requires=["qtdemo-qt6>=1"], tag=tag)
    return wheel, core, tmp_path / "site"


def test_a_need_supplied_by_a_declared_distribution_is_named_as_supplied_by_it(
    pyqt: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel, core, site = pyqt
    install(site, "qtdemo-qt6", {"qtdemo/Qt6/lib/libQt6Core.so.6": core})
    monkeypatch.syspath_prepend(str(site))
    result = audit(wheel)
    needs = {n.soname: n for e in result.elfs for n in e.needs}
    assert needs["libQt6Core.so.6"].kind == "distribution"
    assert needs["libQt6Core.so.6"].where == "qtdemo-qt6: qtdemo/Qt6/lib/libQt6Core.so.6"
    (missing,) = [f for f in result.violations if f.code == "unresolved"]
    assert missing.message.startswith("needs libxkbcommon.so.0: not in the wheel")
    (tag,) = [f for f in result.violations if f.code == "platform-tag"]
    assert "libxkbcommon.so.0" in tag.message and "libQt6Core" not in tag.message


def test_a_declared_distribution_not_installed_is_named_in_the_hint(
    pyqt: tuple[Path, Path, Path],
) -> None:
    wheel, _, _ = pyqt
    result = audit(wheel)
    (qt,) = [f for f in result.violations if f.code == "unresolved" and "libQt6Core" in f.message]
    assert qt.message.endswith(
        "its search reaches qtdemo/Qt6/lib, where the wheel installs nothing, and qtdemo-qt6 "
        "(declared, not installed here) may install it there: install them to check"
    )


def test_a_need_arriving_through_a_declared_distributions_requirement_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchvision: libcudart.so.12 from the NVIDIA runtime's distribution, which torch (the
    Requires-Dist) requires."""
    cc = Compiler(tmp_path / "build")
    cudart = library(cc, "libcudart.so.12", "cuda_runtime")
    ext = extension(cc, "_C", "$ORIGIN/../nvdemo/cu12/lib", [cudart], ["cuda_runtime"])
    members = {"visiondemo/__init__.py": b"", f"visiondemo/_C{EXT}": ext}
    wheel = make_wheel(tmp_path / "w", members, name="visiondemo", requires=["torchdemo"])
    site = tmp_path / "site"
    install(site, "torchdemo", {"torchdemo/__init__.py": tmp_path / "w" / wheel.name}, ["nvdemo"])
    install(site, "nvdemo", {"nvdemo/cu12/lib/libcudart.so.12": cudart})
    monkeypatch.syspath_prepend(str(site))
    result = audit(wheel)
    assert result.ok, render_text([result])
    (need,) = [n for e in result.elfs for n in e.needs if n.soname == "libcudart.so.12"]
    assert need.where == "nvdemo (through torchdemo): nvdemo/cu12/lib/libcudart.so.12"
