"""A distribution's library that finds its own needs only after an import (gcc stand-ins).

A library without a RUNPATH (here a stand-in ``libtorch.so``) may need ``libtorch_python.so``,
which only ``import torch`` may load, and ``libcudart.so.13``, which it finds only because
something loaded it first. A wheel library linked against it then fails to load in a fresh
interpreter unless the wheel loads those first. The stand-ins are real gcc-built ELFs under
those names, installed in a site directory the way torch and nvidia-cuda-runtime install theirs,
with a stand-in ``torch`` package that loads its library as torch's ``_C`` does; the interpreter
and ld.so do the loading. (flash-attn's extension, which has no SONAME either, is loaded by
import instead: tests/integration/test_site_layouts.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.wheelmaker import EXT, Compiler, have_gcc, make_wheel
from wheels.assemble import PRELOAD_MARK, fix_loading, read_dynamic
from wheels.policy import load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]

TORCH_PYTHON = "libtorch_python.so"
CUDART = "libcudart.so.13"
LIBTORCH = "libtorch.so"
EXTENSION = """
#include <Python.h>
extern int ops_attention(int);
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_ops", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ops(void) {
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddIntConstant(m, "answer", ops_attention(42));
    return m;
}
"""


def standin_site(root: Path) -> Path:
    """A site directory with the stand-ins, and ``root/wheel``: the wheel's tree as staged."""
    cc = Compiler(root / "build")
    site = root / "site"
    torch_python = cc.shared(TORCH_PYTHON, "int THPVariable_Wrap(int x) { return x; }\n",
                             soname=TORCH_PYTHON)  # fmt: skip
    cudart = cc.shared(CUDART, "int cudaGetDevice(int *d) { *d = 0; return 0; }\n", soname=CUDART)
    libtorch = cc.shared(
        LIBTORCH,
        "extern int THPVariable_Wrap(int);\nextern int cudaGetDevice(int *);\n"
        "int mha_fwd_kvcache(int x) { int d; cudaGetDevice(&d); return THPVariable_Wrap(x); }\n",
        soname=LIBTORCH,
        links=[torch_python, cudart],
    )
    for lib, where in (
        (torch_python, "torch/lib"),
        (cudart, "nvidia/cu13/lib"),
        (libtorch, "torch/lib"),
    ):
        (site / where).mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, site / where / lib.name)
    (site / "torch" / "__init__.py").write_text(
        "import ctypes, os\n"
        f"_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', {TORCH_PYTHON!r}))\n"
    )
    ops = cc.shared(
        "libops.so",
        "extern int mha_fwd_kvcache(int);\n"
        "int ops_attention(int x) { return mha_fwd_kvcache(x); }\n",
        soname="libops.so",
        links=[site / "torch" / "lib" / LIBTORCH],
    )
    ext = cc.shared(
        f"_ops{EXT}", EXTENSION, links=[ops], flags=[f"-I{sysconfig.get_paths()['include']}"]
    )
    tree = root / "wheel" / "demo"
    (tree / "lib").mkdir(parents=True)
    shutil.copy(ops, tree / "lib" / "libops.so")
    shutil.copy(ext, tree / ext.name)
    (tree / "__init__.py").write_text('"""The demo package."""\n\nfrom . import _ops\n')
    return site


def assemble(root: Path, site: Path | None) -> list[str]:
    """Fix ``root/wheel``; ``site`` is where the supplying distributions are read (None: none)."""
    supplied = dict(load_vendor_policy("nvidia").distributions)
    return fix_loading(root / "wheel", supplied, dirs=[site] if site else [])


def import_installed(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """Install ``root/wheel`` into ``site``; import it in a fresh interpreter that has ``site``."""
    shutil.copytree(root / "wheel" / "demo", site / "demo")
    code = "import sys, demo; print('answer', demo._ops.answer, 'torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=site.parent,
    )


def test_standin_library_loads_once_the_assembler_adds_its_need_and_the_torch_import(
    tmp_path: Path,
) -> None:
    site = standin_site(tmp_path / "a")
    requires = assemble(tmp_path / "a", site)
    info = read_dynamic(tmp_path / "a" / "wheel" / "demo" / "lib" / "libops.so")
    assert info is not None
    assert info.needed[0] == CUDART and TORCH_PYTHON not in info.needed
    assert info.runpath == ("$ORIGIN/../../torch/lib", "$ORIGIN/../../nvidia/cu13/lib")
    assert requires == ["torch", "nvidia-cuda-runtime"]
    init = (tmp_path / "a" / "wheel" / "demo" / "__init__.py").read_text()
    assert init.index("The demo package") < init.index("import torch") < init.index("from . import")
    assert init.count(PRELOAD_MARK) == 1
    assemble(tmp_path / "a", site)  # a second pass adds nothing
    assert (tmp_path / "a" / "wheel" / "demo" / "__init__.py").read_text() == init
    done = import_installed(tmp_path / "a", site)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["answer", "42", "True"]

    # Assembled where torch's copy cannot be read: the RUNPATH only, and the import fails.
    bare_site = standin_site(tmp_path / "b")
    assemble(tmp_path / "b", None)
    failed = import_installed(tmp_path / "b", bare_site)
    assert failed.returncode != 0 and "cannot open shared object file" in failed.stderr


@pytest.mark.usefixtures("without_host_site_packages")
def test_audit_rejects_a_standin_wheel_whose_distribution_library_is_stranded(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = standin_site(tmp_path)
    tree = tmp_path / "wheel" / "demo"
    names = ["__init__.py", "lib/libops.so", f"_ops{EXT}"]
    requires = ["torch", "nvidia-cuda-runtime"]

    def wheel(name: str) -> Path:
        files: dict[str, bytes | Path] = {f"demo/{n}": tree / n for n in names}
        return make_wheel(tmp_path / name, files, version="1.0+cu130", requires=requires)

    fix_loading(tree.parent, dict(load_vendor_policy("nvidia").distributions), dirs=[])
    stranded = wheel("stranded")
    fix_loading(tree.parent, dict(load_vendor_policy("nvidia").distributions), dirs=[site])
    fixed = wheel("fixed")
    # torch's copy is importable from a sys.path entry (as a PYTHONPATH install is).
    monkeypatch.syspath_prepend(str(site))
    bad: CliResult = cli("audit", stranded, "--vendor", "nvidia")
    assert bad.code != 0
    findings = [line for line in bad.out.splitlines() if "[stranded-need]" in line]
    assert len(findings) == 2, bad.out
    assert any(f"{CUDART} in the DT_NEEDED" in line for line in findings)
    assert any("import torch in demo/__init__.py" in line for line in findings)
    good: CliResult = cli("audit", fixed, "--vendor", "nvidia")
    assert good.code == 0, good.out
    assert "stranded-need" not in good.out and "unverified" not in good.out


def test_a_package_init_that_is_not_utf8_is_a_build_error_naming_it(tmp_path: Path) -> None:
    from builder.core.errors import BuildError

    site = standin_site(tmp_path)
    init = tmp_path / "wheel" / "demo" / "__init__.py"
    init.write_bytes(b"# caf\xe9\nfrom . import _ops\n")
    with pytest.raises(BuildError, match=r"cannot add imports to .*__init__\.py"):
        fix_loading(tmp_path / "wheel", dict(load_vendor_policy("nvidia").distributions), [site])
