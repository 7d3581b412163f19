"""The CI matrix, derived from stack.yaml: one job per vendor x Python, on the vendor's runners.

Each entry says which runner labels the job needs (``vendors.<v>.ci.runs-on``), the container
image when the manifest declares one (``vendors.<v>.ci.image``), and which nox session the job
runs. The result is ready for GitHub Actions' ``strategy.matrix`` (through ``fromJSON``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.errors import UsageError
from builder.manifest.loader import resolve_vendor
from builder.manifest.model import Stack

# One Python per vendor by default: the C++ libraries do not depend on it (their store entries
# are shared between Pythons on a runner), so more Pythons only rebuild the engine's extension.
DEFAULT_PYTHONS: tuple[str, ...] = ("3.11",)
# Runner labels for a vendor whose manifest entry has no ``ci.runs-on``.
DEFAULT_LABELS: tuple[str, ...] = ("self-hosted", "linux", "x64")
# The nox session a vendor's CI job runs: the whole release gate (builder.release).
JOB_SESSION = "release"

_PYTHON_RE = re.compile(r"^3\.\d{1,2}$")


def session_name(session: str, vendor: str) -> str:
    """The id nox gives a session parametrized by vendor: ``wheel(vendor='nvidia')``."""
    return f"{session}(vendor={vendor!r})"


def runner_labels(stack: Stack, vendor: str) -> list[str]:
    declared = stack.vendors[vendor].ci.runs_on
    return list(declared) if declared else [*DEFAULT_LABELS, vendor]


def check_pythons(stack: Stack, pythons: Sequence[str]) -> list[str]:
    """``X.Y`` versions, each allowed by the wheel's ``requires_python``; duplicates dropped."""
    allowed = SpecifierSet(stack.wheel.requires_python) if stack.wheel else SpecifierSet()
    out: list[str] = []
    for python in pythons:
        if not _PYTHON_RE.match(python):
            raise UsageError(f"--python expects X.Y (such as 3.11), got '{python}'")
        if Version(python) not in allowed:
            raise UsageError(
                f"Python {python} is outside the wheel's requires_python '{allowed}'",
                hint=f"see wheel.requires_python in {stack.label}",
            )
        if python not in out:
            out.append(python)
    return out


def matrix(
    stack: Stack, vendors: Sequence[str] = (), pythons: Sequence[str] = ()
) -> dict[str, list[dict[str, Any]]]:
    """``{"include": [...]}``: every declared vendor (or those named) x every Python named.

    Without ``pythons``, a stack.yaml whose ``wheel.pythons`` lists several gets one job per
    vendor that releases them all from one build, as a local ``release`` does: its ``python``
    is the last listed (the one the tool runs under), ``pythons`` all of them."""
    selected = [resolve_vendor(stack, v) for v in vendors] if vendors else list(stack.vendors)
    selected = list(dict.fromkeys(selected))
    listed = stack.wheel.pythons if stack.wheel is not None and not pythons else ()
    versions = [listed[-1]] if listed else check_pythons(stack, pythons or DEFAULT_PYTHONS)
    include: list[dict[str, Any]] = []
    for vendor in selected:
        for python in versions:
            include.append(_entry(stack, vendor, python, listed))
    return {"include": include}


def _entry(stack: Stack, vendor: str, python: str, pythons: Sequence[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "vendor": vendor,
        "python": python,
        "runs-on": runner_labels(stack, vendor),
    }
    if pythons:
        entry["pythons"] = list(pythons)
        entry["python-versions"] = "\n".join(pythons)  # as actions/setup-python reads several
    image = stack.vendors[vendor].ci.image
    if image:
        entry["container"] = image
    entry["session"] = session_name(JOB_SESSION, vendor)
    return entry
