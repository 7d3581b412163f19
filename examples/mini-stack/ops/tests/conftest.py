"""MiniOps' own suite, shaped like InfiniOps': ``--devices`` picks the devices, and an operator
this build leaves out (MINI_OPS_OPS) is skipped by name, not failed."""

import ctypes
import os
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--devices", nargs="+", default=["cpu"], help="Device(s) to test on.")


@pytest.fixture(scope="session")
def miniops():
    """libminiops.so of the store entry under test ($INFINI_STACK_PREFIX)."""
    prefix = os.environ.get("INFINI_STACK_PREFIX")
    if not prefix:
        pytest.fail("INFINI_STACK_PREFIX names no store entry: run me with build --test")
    return ctypes.CDLL(str(Path(prefix) / "lib" / "libminiops.so"))


@pytest.fixture(scope="session")
def operators(miniops):
    miniops.miniops_list.restype = ctypes.c_char_p
    return miniops.miniops_list().decode().split(",")


@pytest.fixture
def operator(miniops, operators):
    """``operator(name)``: the MiniOps operator ``name``, the test skipped by name when this
    build leaves it out (MINI_OPS_OPS)."""

    def named(name):
        if name not in operators:
            pytest.skip(f"operator '{name}' is not in this build ({','.join(operators)})")
        return getattr(miniops, f"miniops_{name}")

    return named


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", metafunc.config.getoption("--devices"))
