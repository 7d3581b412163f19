"""The no-op fast path: an unchanged ``build`` settled before the rest of the tool is loaded.

A successful ``build`` leaves a memo (written by :mod:`builder.memo`) of everything its plan was
read from: the command line, the working directory and the interpreter; the environment
variables a build can read; the stat of every file planning and preflight read (manifests,
recipes, path source trees, this tool's own code, the compiler, the interpreter, the toolkit
files preflight found, the directories on PATH); the symlinks on the way to them; and the store
records of the keys it produced. The next identical ``build`` checks exactly that. When all of
it holds it writes its run report and exits without loading the manifest, probing the host or
running CMake or Ninja; anything else takes the full path, which plans, builds what is missing
and leaves a new memo.

This module runs first in every ``infini-stack`` process (:mod:`builder.__main__` calls it), so
it imports only ``os``, ``sys`` and built-in modules (``marshal``, ``time``):
no json, re, pathlib, typing, argparse or even ``__future__``, which would cost more than the
whole check. Memos are ``marshal`` data, read and written only here.
"""

import marshal
import os
import sys
import time

# No ``from __future__ import annotations`` either: annotations naming these are quoted.
# typing.TYPE_CHECKING without typing, which imports re: this check must cost what ninja's does.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

FORMAT = 2
HOME_ENV = "INFINI_STACK_HOME"
# Marks in a memo's report template, replaced with the run's start time and duration.
STARTED_MARK = '"@@started@@"'
SECONDS_MARK = '"@@seconds@@"'

# Environment a build can read: compilers and their flags, search paths, toolkit and provider
# locations, the interpreter's, and this tool's own. A change in any of them is not a no-op.
_ENV_NAMES = frozenset(
    {
        "CC",
        "CXX",
        "CUDACXX",
        "CUDAHOSTCXX",
        "HIPCXX",
        "PATH",
        "HOME",
        "XDG_CACHE_HOME",
        "CPATH",
        "LIBRARY_PATH",
        "SOURCE_DATE_EPOCH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
    }
)
_ENV_PREFIXES = (
    "INFINI_",
    "CMAKE_",
    "CUDA",
    "NVCC",
    "NCCL",
    "CUTLASS",
    "MUSA",
    "MCCL",
    "MPI",
    "OMPI",
    "THEAD",
    "PPU",
    "PYTHON",
    "PYBIND11",
    "CCACHE",
    "SCCACHE",
    "TORCH",
    "LD_",
    "PKG_CONFIG",
)
_ENV_SUFFIXES = ("FLAGS", "_ROOT", "_HOME", "_DIR", "_PATH", "_INCLUDE_PATH")
# Never written into a memo: the remote cache's settings and credentials (no build reads them),
# and anything named like a secret or holding a URL with credentials (a compiler cache's backend).
_ENV_UNRECORDED = ("INFINI_STACK_CACHE",)
_SECRET_WORDS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "CREDENTIAL", "_KEY", "AUTH")


def build_env(environ: "Mapping[str, str]") -> dict[str, str]:
    """The variables of ``environ`` a build can read (compared whole: one added is a change)."""
    return {
        name: value
        for name, value in environ.items()
        if (name in _ENV_NAMES or name.startswith(_ENV_PREFIXES) or name.endswith(_ENV_SUFFIXES))
        and not _secret(name, value)
    }


def _secret(name: str, value: str) -> bool:
    if name.startswith(_ENV_UNRECORDED) or any(word in name for word in _SECRET_WORDS):
        return True
    netloc = value.partition("://")[2].partition("/")[0]
    return "@" in netloc


def signature(path: str) -> tuple[int, int, int, int, int] | None:
    """What a stat says of ``path``: a rewrite, a touch, a replacement or a removal changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


def default_home(environ: "Mapping[str, str]") -> str:
    if value := environ.get(HOME_ENV):
        return os.path.expanduser(value)
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser(environ.get("HOME", "~")), ".cache"
    )
    return os.path.join(os.path.expanduser(cache), "infini-stack")


def home_of(argv: "Sequence[str]", environ: "Mapping[str, str]") -> str:
    """The home a ``build`` command line names (``--home``), else the environment's."""
    home = None
    for i, arg in enumerate(argv):
        if arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
        elif arg.startswith("--home="):
            home = arg[len("--home=") :]
    return os.path.realpath(home or default_home(environ))


def request(argv: "Sequence[str]", cwd: str) -> list[str]:
    """What identifies a memo: the interpreter, the working directory and the command line."""
    return [sys.executable, cwd, *argv]


def memo_file(home: str, argv: "Sequence[str]", cwd: str) -> str:
    digest = 0xCBF29CE484222325  # FNV-1a, 64 bits: a file name, not a proof (the memo is)
    for byte in "\0".join(request(argv, cwd)).encode():
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return os.path.join(home, "cache", "noop", f"{digest:016x}.memo")


def holds(
    memo: "Mapping[str, Any]", argv: "Sequence[str]", cwd: str, environ: "Mapping[str, str]"
) -> bool:
    """Everything the memo's build was planned from is as it was, and its entries are stored."""
    if memo.get("format") != FORMAT or memo.get("request") != request(argv, cwd):
        return False
    if memo["env"] != build_env(environ) or memo["cpus"] != os.cpu_count():
        return False
    for path, sig in memo["files"]:
        if signature(path) != sig:
            return False
    for link, target in memo["links"].items():
        try:
            if os.readlink(link) != target:
                return False
        except OSError:
            return False
    return all(os.path.isfile(record) for record in memo["records"])


def load(path: str) -> "dict[str, Any] | None":
    try:
        with open(path, "rb") as f:
            data = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def save(path: str, memo: "dict[str, Any]") -> None:
    """Write ``memo`` whole or not at all (a reader never sees half a memo)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "wb") as f:
        marshal.dump({**memo, "format": FORMAT}, f)
    os.replace(tmp, path)


def write_run_report(runs: str, command: str, vendor: str, started: float, text: str) -> str:
    """``runs/<stamp>-<command>-<vendor>-<pid>.json``, and the same text as ``runs/last.json``."""
    os.makedirs(runs, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    path = os.path.join(runs, f"{stamp}-{command}-{vendor}-{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    tmp = os.path.join(runs, f".last.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(runs, "last.json"))
    return path


def settle(argv: "Sequence[str]", environ: "Mapping[str, str] | None" = None) -> int | None:
    """Exit status of ``infini-stack ARGV`` when it is an unchanged build, else None."""
    if not argv or argv[0] != "build" or "--no-memo" in argv or "-h" in argv or "--help" in argv:
        return None
    started = time.time()
    environ = os.environ if environ is None else environ
    try:
        cwd = os.getcwd()
        memo = load(memo_file(home_of(argv, environ), argv, cwd))
        if memo is None or not holds(memo, argv, cwd, environ):
            return None
        seconds = time.time() - started
        text = memo["report"].replace(STARTED_MARK, repr(started))
        text = text.replace(SECONDS_MARK, repr(round(seconds, 3)))
        path = write_run_report(memo["runs"], "build", memo["vendor"], started, text)
    except (OSError, KeyError, TypeError, ValueError):
        return None  # an unreadable memo or an unwritable home: the full path says what is wrong
    print(f"{memo['summary']} in {seconds:.1f}s", file=sys.stderr)
    print(f"run report: {path}", file=sys.stderr)
    return 0
