"""The wheel loads what other distributions supply wherever pip put them (gcc stand-ins).

flash-attn's extension ``flash_attn_2_cuda`` is a top-level module without a SONAME; a wheel
library that needs it by DT_NEEDED finds it through RUNPATH ``$ORIGIN/../..``, so only when
flash-attn sits in the wheel's own site-packages. Installed in another site directory the venv
sees (a ``.pth``, as ``builder/checks/venv.make`` writes, or ``--system-site-packages``), loading
fails with "cannot open shared object file", and importing the module first does not help:
ld.so never matches a need to an object it loaded by path without a SONAME. The assembler
drops that DT_NEEDED and has the package import torch, then flash_attn_2_cuda, and make the
latter's symbols global. ``libtorch_python.so`` has a SONAME: ``import torch`` first is enough.

The stand-ins are real gcc-built ELFs under the real names, with a stand-in ``torch`` package
that loads its library as torch's ``_C`` does; each wheel is installed by pip into a fresh venv
and imported by its interpreter, with ld.so doing the loading.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest

from builder.checks import venv
from tests.wheelmaker import EXT, Compiler, have_gcc, make_wheel
from wheels.assemble import PRELOAD_MARK, fix_loading, read_dynamic
from wheels.audit import audit_wheel
from wheels.audit_report import WheelAudit, render_text
from wheels.policy import DistLib, load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]

TORCH_PYTHON = "libtorch_python.so"
CUDART = "libcudart.so.13"
FLASH = f"flash_attn_2_cuda{EXT}"  # this interpreter's suffix, or it would not import
INCLUDE = f"-I{sysconfig.get_paths()['include']}"
NOT_FOUND = "cannot open shared object file"
GLOBAL_LINE = "_ctypes.CDLL(flash_attn_2_cuda.__file__"


def extension(module: str, call: str) -> str:
    """An extension module whose ``answer`` is ``call`` applied to 42."""
    return f"""
#include <Python.h>
extern int {call}(int);
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{module}(void) {{
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddIntConstant(m, "answer", {call}(42));
    return m;
}}
"""


def standins(cc: Compiler, site: Path) -> None:
    """torch (its package loads libtorch_python.so, which finds libcudart through RUNPATH, as
    torch's libraries find nvidia-cuda-runtime's) and flash-attn's extension (no SONAME, no
    RUNPATH: it counts on ``import torch``) in the site directory ``site``."""
    cudart = cc.shared(CUDART, "int cudaGetDevice(int *d) { *d = 0; return 0; }\n", soname=CUDART)
    torch_python = cc.shared(
        TORCH_PYTHON,
        "extern int cudaGetDevice(int *);\n"
        "int THPVariable_Wrap(int x) { int d; cudaGetDevice(&d); return x + d; }\n",
        soname=TORCH_PYTHON,
        links=[cudart],
        runpath="$ORIGIN/../../nvidia/cu13/lib",
    )
    flash = cc.shared(
        FLASH,
        "extern int THPVariable_Wrap(int);\nextern int cudaGetDevice(int *);\n"
        "int mha_fwd_kvcache(int x) { int d; cudaGetDevice(&d); return THPVariable_Wrap(x); }\n"
        + extension("flash_attn_2_cuda", "mha_fwd_kvcache"),
        links=[torch_python, cudart],
        flags=[INCLUDE],
    )
    for lib, where in ((cudart, "nvidia/cu13/lib"), (torch_python, "torch/lib"), (flash, ".")):
        (site / where).mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, site / where / lib.name)
    (site / "torch" / "__init__.py").write_text(
        "import ctypes, os\n"
        f"_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', {TORCH_PYTHON!r}))\n"
    )


def package(cc: Compiler, tree: Path, site: Path, *, runpath: str | None = None) -> Path:
    """``demo``: the extension ``_ops`` loading ``lib/libops.so``, which needs flash-attn's
    extension by DT_NEEDED (as InfiniOps' library does); ``tree`` is the staged wheel."""
    ops = cc.shared(
        "libops.so",
        "extern int mha_fwd_kvcache(int);\n"
        "int ops_attention(int x) { return mha_fwd_kvcache(x); }\n",
        soname="libops.so",
        runpath=runpath,
        flags=[f"-L{site}", f"-l:{FLASH}"],
    )
    ext = cc.shared(
        f"_ops{EXT}", extension("_ops", "ops_attention"), links=[ops], runpath="$ORIGIN/lib",
        flags=[INCLUDE],
    )  # fmt: skip
    demo = tree / "demo"
    (demo / "lib").mkdir(parents=True)
    shutil.copy(ops, demo / "lib" / "libops.so")
    shutil.copy(ext, demo / ext.name)
    (demo / "__init__.py").write_text('"""The demo package."""\n\nfrom . import _ops\n')
    return demo


def wheel(tree: Path, out: Path, requires: Sequence[str] = ("flash-attn",)) -> Path:
    files: dict[str, bytes | Path] = {
        p.relative_to(tree).as_posix(): p for p in sorted(tree.rglob("*")) if p.is_file()
    }
    return make_wheel(out, files, version="1.0+cu130", requires=requires)


def nvidia() -> dict[str, DistLib]:
    return dict(load_vendor_policy("nvidia").distributions)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stand-in site, and the wheels: assembled where the assembler sees flash-attn and
    where it sees nothing; as assembled before the fix (DT_NEEDED and RUNPATH $ORIGIN/../..,
    `import torch`); and that plus `import flash_attn_2_cuda` first, which is not enough."""
    root = tmp_path_factory.mktemp("layouts")
    cc = Compiler(root / "build")
    site = root / "site"
    standins(cc, site)
    out: dict[str, Path] = {"site": site}
    for name, dirs in (("fixed", [site]), ("fixed_blind", [])):
        tree = root / name
        package(cc, tree, site)
        requires = fix_loading(tree, nvidia(), dirs=dirs)
        out[f"{name}_tree"] = tree
        out[name] = wheel(tree, root / f"{name}-wheel", requires)
    naive = "import torch\nimport flash_attn_2_cuda\n"
    for name, first in (("unfixed", "import torch\n"), ("naive", naive)):
        tree = root / name
        demo = package(cc, tree, site, runpath="$ORIGIN/../..")
        (demo / "__init__.py").write_text(f'"""The demo package."""\n{first}from . import _ops\n')
        out[name] = wheel(tree, root / f"{name}-wheel")
    return out


def installed(root: Path, wheel_path: Path, site: Path, *, same_site: bool) -> Path:
    """A fresh venv with ``wheel_path`` installed by pip; the stand-ins in its own
    site-packages (``same_site``) or in ``site``, which a ``.pth`` adds after its own."""
    python = venv.make(root, sys.executable, inherit=False)
    own = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    if same_site:
        shutil.copytree(site, own, dirs_exist_ok=True)
    else:
        (own / "standins.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    venv.install(wheel_path, python, root)
    return python


def import_demo(python: Path) -> subprocess.CompletedProcess[str]:
    code = "import demo, sys; print('answer', demo._ops.answer, sorted(m for m in sys.modules if m in ('torch', 'flash_attn_2_cuda')))"  # noqa: E501
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)


# -- what the assembler writes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fixed", "fixed_blind"])
def test_the_assembler_drops_the_flash_need_and_imports_torch_then_flash_made_global(
    built: dict[str, Path], name: str
) -> None:
    demo = built[f"{name}_tree"] / "demo"
    info = read_dynamic(demo / "lib" / "libops.so")
    assert info is not None
    assert FLASH not in info.needed and info.runpath == ()
    init = (demo / "__init__.py").read_text()
    order = ["The demo package", PRELOAD_MARK, "import torch", "import flash_attn_2_cuda",
             GLOBAL_LINE, "from . import _ops"]  # fmt: skip
    assert [init.index(s) for s in order] == sorted(init.index(s) for s in order), init
    assert init.count(PRELOAD_MARK) == 1
    fix_loading(built[f"{name}_tree"], nvidia(), dirs=[built["site"]])
    assert (demo / "__init__.py").read_text() == init  # a second pass adds nothing


def test_what_the_assembler_writes_does_not_depend_on_what_it_sees(
    built: dict[str, Path],
) -> None:
    for path in ("demo/__init__.py", "demo/lib/libops.so", f"demo/_ops{EXT}"):
        seen = (built["fixed_tree"] / path).read_bytes()
        assert seen == (built["fixed_blind_tree"] / path).read_bytes(), path


# -- what the interpreter and ld.so do with it ---------------------------------------------------


def test_split_layout_imports_once_fixed_and_fails_without_the_fix(
    built: dict[str, Path], tmp_path: Path
) -> None:
    site = built["site"]
    done = import_demo(installed(tmp_path / "fixed", built["fixed_blind"], site, same_site=False))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["answer", "42", "['flash_attn_2_cuda',", "'torch']"]
    before = import_demo(installed(tmp_path / "unfixed", built["unfixed"], site, same_site=False))
    assert before.returncode != 0 and f"{FLASH}: {NOT_FOUND}" in before.stderr, before.stderr
    naive = import_demo(installed(tmp_path / "naive", built["naive"], site, same_site=False))
    assert naive.returncode != 0 and f"{FLASH}: {NOT_FOUND}" in naive.stderr, naive.stderr


def test_same_site_layout_imports_fixed_and_unfixed(built: dict[str, Path], tmp_path: Path) -> None:
    site = built["site"]
    for name in ("fixed", "unfixed"):
        done = import_demo(installed(tmp_path / name, built[name], site, same_site=True))
        assert done.returncode == 0, (name, done.stderr)
        assert done.stdout.split()[:2] == ["answer", "42"]


# -- what the audit says -------------------------------------------------------------------------


def audit(path: Path) -> WheelAudit:
    return audit_wheel(path, load_vendor_policy("nvidia"))


def test_audit_accepts_the_fixed_wheel_with_flash_readable_elsewhere_or_nowhere(
    built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    blind = audit(built["fixed_blind"])  # flash-attn is not installed on this host
    assert blind.ok, render_text([blind])
    ops = next(e for e in blind.elfs if e.member == "demo/lib/libops.so")
    assert ops.symbols.unverified == ("mha_fwd_kvcache",)
    monkeypatch.syspath_prepend(str(built["site"]))  # importable from another site directory
    seen = audit(built["fixed"])
    assert seen.ok and not seen.warnings, render_text([seen])
    ops = next(e for e in seen.elfs if e.member == "demo/lib/libops.so")
    assert ops.symbols.bound == ops.symbols.undefined and not ops.symbols.unverified


def test_audit_rejects_a_wheel_that_needs_flash_by_name(built: dict[str, Path]) -> None:
    for name in ("unfixed", "naive"):
        result = audit(built[name])
        (finding,) = [f for f in result.violations if f.code == "import-only-need"]
        assert finding.member == "demo/lib/libops.so"
        assert FLASH in finding.message and NOT_FOUND in finding.message


def rewritten(built: dict[str, Path], tmp_path: Path, old: str, new: str) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(built["fixed_tree"], tree)
    init = tree / "demo" / "__init__.py"
    text = init.read_text()
    assert old in text
    init.write_text(text.replace(old, new))
    return wheel(tree, tmp_path / "wheel")


def test_audit_rejects_a_preload_that_does_not_make_flash_global(
    built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = rewritten(built, tmp_path, GLOBAL_LINE, "print(flash_attn_2_cuda.__file__")
    monkeypatch.syspath_prepend(str(built["site"]))
    (finding,) = [f for f in audit(path).violations if f.code == "undefined-symbol"]
    assert finding.member == "demo/lib/libops.so" and "mha_fwd_kvcache" in finding.message


def test_audit_rejects_flash_imported_before_torch(built: dict[str, Path], tmp_path: Path) -> None:
    init = (built["fixed_tree"] / "demo" / "__init__.py").read_text()
    torch_line = next(
        line for line in init.splitlines(keepends=True) if line.startswith("import torch")
    )
    path = rewritten(built, tmp_path, torch_line, "")  # fmt: skip
    (finding,) = [f for f in audit(path).violations if f.code == "import-order"]
    assert finding.member == "demo/__init__.py" and "without importing torch" in finding.message


def test_a_library_needing_libtorch_python_imports_torch_first_in_every_layout(
    built: dict[str, Path], tmp_path: Path
) -> None:
    site, cc = built["site"], Compiler(tmp_path / "build")
    for name in ("fixed", "unfixed"):
        bind = cc.shared(
            "libbind.so",
            "extern int THPVariable_Wrap(int);\n"
            "int bind_wrap(int x) { return THPVariable_Wrap(x); }\n",
            soname="libbind.so",
            runpath=None if name == "fixed" else "$ORIGIN/../../torch/lib",
            links=[site / "torch" / "lib" / TORCH_PYTHON],
        )  # fmt: skip
        ext = cc.shared(f"_bind{EXT}", extension("_bind", "bind_wrap"), links=[bind],
                        runpath="$ORIGIN/lib", flags=[INCLUDE])  # fmt: skip
        demo = tmp_path / name / "demo"
        (demo / "lib").mkdir(parents=True)
        shutil.copy(bind, demo / "lib" / "libbind.so")
        shutil.copy(ext, demo / ext.name)
        (demo / "__init__.py").write_text("from . import _bind\n")
        if name == "fixed":
            assert fix_loading(demo.parent, nvidia(), dirs=[]) == ["torch"]
            init = (demo / "__init__.py").read_text()
            assert init.index("import torch") < init.index("from . import _bind")
        path = wheel(demo.parent, tmp_path / f"{name}-wheel", ["torch"])
        python = installed(tmp_path / f"{name}-venv", path, site, same_site=False)
        code = "import demo; print(demo._bind.answer)"
        run = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
        result = audit(path)
        if name == "fixed":
            assert run.returncode == 0 and run.stdout.split() == ["42"], run.stderr
            assert result.ok, render_text([result])
        else:
            assert run.returncode != 0 and f"{TORCH_PYTHON}: {NOT_FOUND}" in run.stderr
            (finding,) = [f for f in result.violations if f.code == "import-first"]
            assert "import torch first in demo/__init__.py" in finding.message


def test_smoke_runs_the_packages_preload_before_loading_each_file(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """The smoke test loads files without running their package's ``__init__``; it runs the
    preload block first, as the package would, so the fixed wheel's files all bind."""
    from builder.checks.smoke import smoke

    target = venv.make(tmp_path / "target", sys.executable, inherit=False)
    own = subprocess.run(
        [str(target), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(own) / "standins.pth").write_text(
        f"import site; site.addsitedir({str(built['site'])!r})\n"
    )
    result = smoke(built["fixed_blind"], "nvidia", python=str(target))
    assert result.ok and result.complete, result.render()
    assert "demo/lib/libops.so" in result.verified
    assert not result.preload_errors
    bare = venv.make(tmp_path / "bare", sys.executable, inherit=False)  # no torch, no flash-attn
    without = smoke(built["fixed_blind"], "nvidia", python=str(bare))
    assert not without.complete
    assert "ModuleNotFoundError" in without.preload_errors.get("demo", ""), without.render()
