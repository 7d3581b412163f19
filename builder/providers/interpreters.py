"""The CPython interpreters a release builds wheels for: each asked for by version (``3.12``)
or by path, found as tools are (candidates -> version probe -> the first that matches).

Candidates for ``3.12``, in order: this tool's own interpreter (when it is a 3.12), ``python3.12``
on ``PATH``, then pyenv's ``$PYENV_ROOT/versions/3.12.*`` (newest first). Each is run once to
read what it is (``sys.executable`` resolves a pyenv shim to the interpreter behind it); one that
cannot run, is not CPython, is free-threaded or is another version is passed over.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.core import proc
from builder.core.errors import PreflightError, StackError, UsageError

_VERSION = re.compile(r"^3\.(\d{1,2})$")
_PROBE = (
    "import json, platform, sys, sysconfig; print(json.dumps({"
    "'executable': sys.executable, 'version': platform.python_version(), "
    "'implementation': sys.implementation.name, "
    "'gil_disabled': bool(sysconfig.get_config_var('Py_GIL_DISABLED')), "
    "'soabi': sysconfig.get_config_var('SOABI') or ''}))"
)


@dataclass(frozen=True, kw_only=True)
class Interpreter:
    """A CPython interpreter a wheel is built for."""

    executable: str
    version: str  # 3.12.1
    soabi: str  # cpython-312-x86_64-linux-gnu

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def tag(self) -> str:
        """Its wheel tag: ``cp312``."""
        return "cp" + self.major_minor.replace(".", "")


def is_version(text: str) -> bool:
    """``3.12`` (a version to look for) rather than a path."""
    return _VERSION.match(text) is not None


def check_request(text: str) -> str:
    """A version ``X.Y`` or an interpreter's path; anything else is a usage error."""
    if is_version(text) or "/" in text or Path(text).is_file():
        return text
    if text.endswith("t") and is_version(text[:-1]):
        raise UsageError(
            f"--python {text}: free-threaded CPython is not built yet",
            hint="see 'Free-threaded CPython' in docs/release.md",
        )
    raise UsageError(f"--python expects X.Y (such as 3.12) or an interpreter's path, got '{text}'")


def probe(executable: str, env: Mapping[str, str]) -> Interpreter | None:
    """What ``executable`` is, when it runs and is a CPython with the GIL; else None."""
    try:
        result = proc.run([executable, "-c", _PROBE], env=env, timeout=30, check=False)
        data = json.loads(result.output.strip().splitlines()[-1])
    except (StackError, ValueError, IndexError):
        return None
    if data.get("implementation") != "cpython" or data.get("gil_disabled"):
        return None
    return Interpreter(
        executable=str(data["executable"]), version=str(data["version"]), soabi=str(data["soabi"])
    )


def pyenv_root(env: Mapping[str, str]) -> Path:
    return Path(env.get("PYENV_ROOT") or Path.home() / ".pyenv")


def candidates(version: str, env: Mapping[str, str]) -> Iterator[str]:
    """Where an interpreter of ``version`` (X.Y) may be, in the order they are tried."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        yield sys.executable
    found = proc.which(f"python{version}", env.get("PATH"))
    if found:
        yield found
    versions = pyenv_root(env) / "versions"
    if versions.is_dir():
        prefix = f"{version}."
        names = [p.name for p in versions.iterdir() if p.name.startswith(prefix)]
        for name in sorted(names, key=_patch_level, reverse=True):
            binary = versions / name / "bin" / f"python{version}"
            if binary.is_file():
                yield str(binary)


def _patch_level(name: str) -> int:
    tail = name.split(".")[2] if name.count(".") >= 2 else ""
    return int(tail) if tail.isdigit() else -1


def find(request: str, env: Mapping[str, str] | None = None) -> Interpreter:
    """The interpreter ``request`` (X.Y or a path) names; a PreflightError when none is here."""
    env = dict(os.environ if env is None else env)
    if not is_version(request):
        return _by_path(request, env)
    tried = []
    for candidate in candidates(request, env):
        found = probe(candidate, env)
        if found is not None and found.major_minor == request:
            return found
        tried.append(candidate)
    where = f" (tried {', '.join(tried)})" if tried else ""
    raise PreflightError(
        f"no CPython {request} interpreter found on PATH or in pyenv{where}",
        hint=f"install it (pyenv install {request}), or give its path: --python /path/to/python",
    )


def _by_path(path: str, env: Mapping[str, str]) -> Interpreter:
    if not Path(path).is_file():
        raise UsageError(f"--python {path}: no such file")
    found = probe(path, env)
    if found is None:
        raise PreflightError(
            f"--python {path} is not a CPython interpreter that runs here (free-threaded "
            "builds are not supported yet)"
        )
    return found


def find_all(
    requests: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[Interpreter, ...]:
    """Each request's interpreter; two for the same X.Y (two wheels with one tag) is an error."""
    found: dict[str, Interpreter] = {}
    for request in requests:
        interpreter = find(check_request(request), env)
        if interpreter.major_minor in found:
            raise UsageError(
                f"two interpreters for Python {interpreter.major_minor}: "
                f"{found[interpreter.major_minor].executable} and {interpreter.executable}",
                hint="give each Python version once: one wheel per interpreter tag",
            )
        found[interpreter.major_minor] = interpreter
    return tuple(found.values())
