"""Detect the host facts planning depends on (interpreter, pybind11, compiler).

The vendor's toolkit and libraries are preflight's to find (builder.preflight): it probes them
once and hands planning what it found.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from builder.core import proc
from builder.core.fs import atomic_write


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    """A vendor toolkit found on the host (or the default place it would be)."""

    root: Path
    compiler: Path | None
    version: str | None
    found: bool
    source: str  # where the root came from: an env var name, "default path" or "PATH"


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    """Everything about the host that planning may depend on; detected once, passed in."""

    python: str
    python_version: str
    soabi: str
    pybind11_dir: str | None
    cpu_count: int
    pybind11_version: str | None = None
    cxx: str = ""
    cxx_version: str = ""
    cmake: str = "cmake"
    toolkit: Toolkit | None = None
    env: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    # Provider fingerprints (name -> "version@path") recorded by preflight; part of cache keys.
    providers: Mapping[str, str] = field(default_factory=dict)
    # CMake cache variables preflight found (NCCL_LIB, FETCHCONTENT_SOURCE_DIR_CUTLASS, ...);
    # vendors pass them on in cmake_defines, so they are part of cache keys too.
    hints: Mapping[str, str] = field(default_factory=dict)
    # The same, narrowed to what each component uses: an NCCL upgrade must not change the key
    # of a component that never looks at NCCL. Planning prefers these when present.
    component_providers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    component_hints: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The interpreter's wheel tag (cp312) when a release builds for several: its components that
    # use Python then build from path sources in a directory of their own. Part of no key.
    python_tag: str = ""
    # The interpreter the tool runs under, when the target is another (release --python): it
    # runs the build tools of recipes with ``python: tool``. None: ``python`` is the tool's own.
    tool_python: ToolPython | None = None

    def for_tool(self) -> HostFacts:
        """The host as a ``python: tool`` build sees it: the tool's own interpreter, whichever
        interpreter the wheel is for, so that every target plans the same build of it."""
        tool = self.tool_python
        if tool is None:
            return replace(self, python_tag="")
        return replace(
            self,
            python=tool.python,
            python_version=tool.python_version,
            soabi=tool.soabi,
            pybind11_dir=tool.pybind11_dir,
            pybind11_version=tool.pybind11_version,
            python_tag="",
            tool_python=None,
        )

    def tool(self) -> ToolPython:
        """The tool's own interpreter, as :meth:`for_tool` puts it back."""
        if self.tool_python is not None:
            return self.tool_python
        return ToolPython(
            python=self.python,
            python_version=self.python_version,
            soabi=self.soabi,
            pybind11_dir=self.pybind11_dir,
            pybind11_version=self.pybind11_version,
        )


@dataclass(frozen=True, kw_only=True)
class ToolPython:
    """The facts of the interpreter the tool runs under that a build can depend on."""

    python: str
    python_version: str
    soabi: str
    pybind11_dir: str | None
    pybind11_version: str | None


def compiler_path(env: Mapping[str, str]) -> str | None:
    """The C++ compiler CMake will pick: CXX (a path, or a name looked up on PATH), else c++ or
    g++ on PATH; CXX as given when it is not found (running it then says so)."""
    path = env.get("PATH")
    if cxx := env.get("CXX"):
        return proc.which(cxx, path) or cxx
    return proc.which("c++", path) or proc.which("g++", path)


def compiler_identity(env: Mapping[str, str], cache: Path | None = None) -> tuple[str, str]:
    """The C++ compiler CMake will pick (:func:`compiler_path`, resolved) and its version line.

    With ``cache`` (a directory), the version line is remembered by the compiler binary's stat,
    as ccache's compiler_check=mtime does: a no-op build then runs no program at all.
    """
    cxx = compiler_path(env)
    if not cxx:
        return "", ""
    resolved = str(Path(cxx).resolve())
    memo = (
        ProgramMemo(cache / "compilers.json", proc.which(cxx, env.get("PATH"))) if cache else None
    )
    if memo is not None and isinstance(known := memo.get(), str):
        return resolved, known
    out = proc.capture([cxx, "--version"], check=False, env=env, timeout=30)
    version = out.splitlines()[0].strip() if out else ""
    if memo is not None:
        memo.put(version)
    return resolved, version


class ProgramMemo:
    """What running a program found (its ``--version``, a link probe), kept in ``file`` and
    keyed by the program's resolved path, that file's stat, and ``extra`` (the flags used)."""

    def __init__(self, file: Path, program: str | None, extra: str = "") -> None:
        self.file = file
        self.program = os.path.realpath(program) if program else None
        self.key = f"{self.program}\0{extra}" if extra else (self.program or "")

    def _stat(self) -> list[int] | None:
        try:
            st = Path(self.program).stat() if self.program else None
        except OSError:
            return None
        return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino] if st else None

    def _load(self) -> dict[str, list[object]]:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self) -> object | None:
        stat = self._stat()
        entry = self._load().get(self.key)
        if stat is None or not isinstance(entry, list) or entry[0] != stat:
            return None
        return entry[1]

    def put(self, value: object) -> None:
        stat = self._stat()
        if stat is None or self.program is None:
            return
        data = self._load()
        data[self.key] = [stat, value]
        with contextlib.suppress(OSError):
            atomic_write(self.file, json.dumps(data))


def pybind11_facts() -> tuple[str | None, str | None]:
    try:
        import pybind11
    except ImportError:
        return None, None
    return pybind11.get_cmake_dir(), pybind11.__version__


def detect(
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    cache: Path | None = None,
) -> HostFacts:
    env = dict(os.environ if env is None else env)
    cxx, cxx_version = compiler_identity(env, cache)
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
        env=env,
    )
