"""Detect the host facts planning depends on (interpreter, pybind11, compiler, vendor toolkit)."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from builder import proc
from builder.vendors import get as get_vendor
from builder.vendors.base import HostFacts


def compiler_identity(env: Mapping[str, str]) -> tuple[str, str]:
    """The C++ compiler CMake will pick (CXX, else c++ on PATH) and its version line."""
    path = env.get("PATH")
    cxx = env.get("CXX") or proc.which("c++", path) or proc.which("g++", path)
    if not cxx:
        return "", ""
    out = proc.capture([cxx, "--version"], check=False, env=env, timeout=30)
    return str(Path(cxx).resolve()), out.splitlines()[0].strip() if out else ""


def pybind11_facts() -> tuple[str | None, str | None]:
    try:
        import pybind11
    except ImportError:
        return None, None
    return pybind11.get_cmake_dir(), pybind11.__version__


def detect(
    vendor: str, env: Mapping[str, str] | None = None, python: str | None = None
) -> HostFacts:
    env = dict(os.environ if env is None else env)
    cxx, cxx_version = compiler_identity(env)
    pybind11_dir, pybind11_version = pybind11_facts()
    return HostFacts(
        python=python or sys.executable,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        soabi=str(sysconfig.get_config_var("SOABI") or ""),
        pybind11_dir=pybind11_dir,
        pybind11_version=pybind11_version,
        cpu_count=os.cpu_count() or 1,
        cxx=cxx,
        cxx_version=cxx_version,
        toolkit=get_vendor(vendor).detect_toolkit(env),
        env=env,
    )
