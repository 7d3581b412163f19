"""The audit's ld.so model (wheels.audit.ldso): which RUNPATH entries reach into site-packages,
and which members are extension modules."""

from __future__ import annotations

import pytest

from wheels.audit.ldso import extension_module, runpath_dir
from wheels.elf import ElfInfo


@pytest.mark.parametrize(
    ("entry", "origin", "expected"),
    [
        ("$ORIGIN", "pkg", ("pkg", None)),
        ("${ORIGIN}/lib", "pkg", ("pkg/lib", None)),
        ("$ORIGIN/../../nvidia/cu13/lib", "pkg/lib", ("nvidia/cu13/lib", None)),
        ("$ORIGIN/..", "pkg", ("", None)),
    ],
)
def test_origin_relative_runpath_resolves_inside_site_packages(
    entry: str, origin: str, expected: tuple[str | None, str | None]
) -> None:
    assert runpath_dir(entry, origin) == expected


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("/home/me/build/lib", "absolute path"),
        ("$ORIGIN/../../..", "out of site-packages"),
        ("", "current directory"),
        ("lib", "relative to the current directory"),
        ("$LIB/x", "token"),
    ],
)
def test_runpath_entries_outside_the_installed_tree_are_problems(entry: str, problem: str) -> None:
    where, message = runpath_dir(entry, "pkg")
    assert where is None and message is not None and problem in message


@pytest.mark.parametrize(
    ("install", "module"),
    [
        ("pkg/_core.cpython-311-x86_64-linux-gnu.so", "_core"),
        ("pkg/_core.abi3.so", "_core"),
        ("pkg/fast.so", "fast"),
        ("pkg/libfast.so", None),
        ("other/fast.so", None),
        ("pkg/lib/libx.so.1", None),
        (None, None),
    ],
)
def test_extension_modules_are_recognised_by_name_and_package(
    install: str | None, module: str | None
) -> None:
    installed = {"pkg/__init__.py": "pkg/__init__.py"}
    assert extension_module(install, installed) == module


def _exporting(*names: str) -> ElfInfo:
    """An ELF's data as far as extension_module reads it: its entry points."""
    from types import SimpleNamespace

    return SimpleNamespace(entry_points=frozenset(names))  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("install", "exports", "module"),
    [
        ("jaxlib/cpu/_lapack.so", ("PyInit__lapack",), "_lapack"),  # PEP 420 namespace package
        ("jaxlib/cpu/_lapack.so", (), None),  # no entry point: a plain library
        ("jaxlib/cpu/_lapack.so", ("PyInit_other",), None),
        ("jax-lib/cpu/_lapack.so", ("PyInit__lapack",), None),  # not importable: no identifier
        ("libfoo.so", ("PyInit_libfoo",), "libfoo"),  # top level, imported as libfoo
    ],
)
def test_an_extension_in_a_namespace_package_is_known_by_its_pyinit_and_import_path(
    install: str, exports: tuple[str, ...], module: str | None
) -> None:
    assert extension_module(install, {}, _exporting(*exports)) == module
