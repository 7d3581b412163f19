"""The wheel's runtime requirements, held against what the target interpreter has installed.

The runtime check installs the wheel without its dependencies into a venv that sees the target
interpreter's packages (:mod:`builder.checks.venv`): a requirement that interpreter lacks (or
holds at a version the specifier refuses) stops the check with an ImportError after the whole
build. ``release`` asks this module first, at preflight, and names the pip line that fixes it.
"""

from __future__ import annotations

import json
import shlex
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.core import proc
from builder.core.errors import EXIT_PREFLIGHT, PreflightError

# Run by the target interpreter, stdlib only: the installed version of each distribution named
# in argv[1] (a JSON list), and the environment markers are evaluated against.
_QUERY = """\
import importlib.metadata as md, json, os, platform, sys
out = {}
for name in json.loads(sys.argv[1]):
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = None
info = sys.implementation
version = f"{info.version.major}.{info.version.minor}.{info.version.micro}"
env = {
    "implementation_name": info.name, "implementation_version": version,
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
print(json.dumps({"installed": out, "env": env}))
"""


@dataclass(frozen=True)
class Unmet:
    """A requirement the target interpreter does not satisfy."""

    requirement: str  # as the wheel declares it
    found: str | None  # the installed version, None when not installed

    def render(self) -> str:
        state = "not installed" if self.found is None else f"{self.found} is installed"
        return f"{self.requirement} ({state})"


def requires_dist(wheel: Path) -> list[str]:
    """The valid Requires-Dist values of the wheel's METADATA, read as the audit reads its
    headers (the audit's requires-dist rule says what is wrong with another)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from wheels.audit.archive import Headers

    with zipfile.ZipFile(wheel) as zf:
        metadata = next(
            (n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")),
            None,
        )
        text = zf.read(metadata).decode("utf-8", "replace") if metadata else ""
    valid = []
    for value in Headers(text).get_all("Requires-Dist"):
        try:
            Requirement(value.strip())
        except InvalidRequirement:
            continue
        valid.append(value.strip())
    return valid


def unmet(requires: Sequence[str], python: str) -> list[Unmet]:
    """The requirements in ``requires`` (Requires-Dist lines without extras) that ``python``'s
    installed distributions do not satisfy; markers are evaluated for ``python``."""
    from packaging.requirements import Requirement

    parsed = [Requirement(r) for r in requires]
    names = sorted({r.name for r in parsed})
    answer = json.loads(
        proc.capture([python, "-c", _QUERY, json.dumps(names)], exit_code=EXIT_PREFLIGHT)
        .strip()
        .splitlines()[-1]
    )
    return missing(parsed, answer["installed"], answer["env"])


def missing(
    parsed: Sequence[object], installed: Mapping[str, str | None], env: Mapping[str, str]
) -> list[Unmet]:
    """The pure part of :func:`unmet`: ``parsed`` are packaging Requirements."""
    from packaging.requirements import Requirement

    out: list[Unmet] = []
    for req in parsed:
        assert isinstance(req, Requirement)
        if req.marker is not None and not req.marker.evaluate(dict(env)):
            continue
        found = installed.get(req.name)
        if found is None or (req.specifier and not req.specifier.contains(found, prereleases=True)):
            out.append(Unmet(str(req), found))
    return out


def pip_line(python: str, unmet_ones: Sequence[Unmet]) -> str:
    """The command that installs what is missing into ``python``."""
    names = " ".join(shlex.quote(u.requirement) for u in unmet_ones)
    return f"{shlex.quote(python)} -m pip install {names}"


def unmet_error(python: str, unmet_ones: Sequence[Unmet]) -> PreflightError:
    """What stops a runtime check whose interpreter lacks the wheel's requirements (exit 3),
    before it starts: each one, and the pip line."""
    listed = "\n".join(f"  {u.render()}" for u in unmet_ones)
    return PreflightError(
        f"the wheel's runtime requirements are not all installed for {python}, where the "
        f"runtime check runs:\n{listed}",
        hint=f"install them first: {pip_line(python, unmet_ones)}",
    )
