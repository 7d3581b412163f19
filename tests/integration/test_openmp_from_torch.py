"""A cpu wheel's OpenMP runtime comes from torch (torch/lib/libgomp.so.1), as libc10 does.

InfiniOps' CPU kernels are OpenMP loops, so libinfiniops.so needs ``libgomp.so.1``. That is not
a manylinux library, and a machine need not have it; torch's wheels carry one (SONAME
``libgomp.so.1``) and torch is already a requirement of the cpu wheel. The library here is real
gcc ``-fopenmp`` output; the site's torch/lib/libgomp.so.1 is a copy of this host's real
libgomp, under a directory of its own, so that which copy ld.so maps can be told apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.wheelmaker import Compiler, have_gcc
from wheels.assemble import fix_loading, read_dynamic
from wheels.policy import load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]

OPENMP_KERNEL = """
#include <omp.h>
int threads_used(void) {
    int most = 0;
    #pragma omp parallel
    {
        #pragma omp critical
        if (omp_get_num_threads() > most) most = omp_get_num_threads();
    }
    return most;
}
"""


def host_libgomp() -> Path:
    found = subprocess.run(
        ["gcc", "-print-file-name=libgomp.so.1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(found)
    if not path.is_absolute() or not path.exists():
        pytest.skip("this host's gcc has no libgomp.so.1")
    return path.resolve()


def test_a_cpu_wheel_library_needing_openmp_loads_torchs_libgomp(tmp_path: Path) -> None:
    ops = Compiler(tmp_path / "build").shared(
        "libops.so", OPENMP_KERNEL, soname="libops.so", flags=["-fopenmp"]
    )
    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    shutil.copy(host_libgomp(), site / "torch" / "lib" / "libgomp.so.1")
    tree = tmp_path / "wheel" / "demo" / "lib"
    tree.mkdir(parents=True)
    shutil.copy(ops, tree / "libops.so")

    supplied = dict(load_vendor_policy("cpu").distributions)
    requires = fix_loading(tmp_path / "wheel", supplied, dirs=[site])

    info = read_dynamic(tree / "libops.so")
    assert info is not None and "libgomp.so.1" in info.needed
    assert info.runpath == ("$ORIGIN/../../torch/lib",)
    assert requires == ["torch"]
    # Installed beside torch, ld.so takes torch's copy, found through that RUNPATH.
    shutil.copytree(tmp_path / "wheel" / "demo", site / "demo")
    code = (
        "import ctypes, sys\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "assert lib.threads_used() >= 1\n"
        "print(*sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(site / "demo" / "lib" / "libops.so")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "2"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(site / "torch" / "lib" / "libgomp.so.1")]
