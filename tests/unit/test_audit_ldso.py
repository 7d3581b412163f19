"""The audit's ld.so model (wheels.audit.ldso): which RUNPATH entries reach into site-packages,
and which members are extension modules."""

from __future__ import annotations

import pytest

from wheels.audit.ldso import extension_module, runpath_dir


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
