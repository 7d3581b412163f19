"""A fresh virtual environment that sees what an install into a target interpreter would see.

``python -m venv --system-site-packages`` exposes the *base* interpreter's packages: when the
target is itself a virtual environment (the usual case: CI's venv, a distribution's torch venv),
the packages installed there are invisible, and a check run in it says "torch is missing" on a
host that has torch. Instead the new environment gets a ``.pth`` file that adds, after its own
site-packages, every site directory the target interpreter imports from (its venv's, the base's
when that venv includes them, the user site, and what their ``.pth`` files add), in the target's
order. A wheel installed into the new environment shadows an installed copy of itself, as an
upgrade in place would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from builder.core import proc
from builder.core.errors import EXIT_AUDIT

PTH_NAME = "_infini_stack_target.pth"

# Run by the target interpreter: its import path without the working directory, the standard
# library and zip archives, i.e. the site directories and what .pth files added to them. In a
# venv, platstdlib is the venv's own lib directory, so lib-dynload is looked for beside stdlib
# too: pip 26 takes whatever a site directory's .pth adds out of its isolated build
# environments, and a lib-dynload there would leave their interpreter without math.
_SITE_DIRS = (
    "import json, os, sys, sysconfig\n"
    "std = {os.path.realpath(sysconfig.get_path(n)) for n in ('stdlib', 'platstdlib')}\n"
    "std |= {os.path.join(p, 'lib-dynload') for p in std}\n"
    "out = [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) not in std]\n"
    "print(json.dumps(out))\n"
)


def site_dirs(python: str) -> tuple[str, ...]:
    """The directories ``python`` imports installed packages from, in its order."""
    out = proc.capture([python, "-c", _SITE_DIRS], exit_code=EXIT_AUDIT)
    return tuple(json.loads(out.strip().splitlines()[-1]))


def make(root: Path, python: str, *, inherit: bool = True) -> Path:
    """A new venv at ``root`` made from ``python``; returns its interpreter. With ``inherit``,
    it sees ``python``'s installed packages (after its own)."""
    proc.run(
        [python, "-m", "venv", "--without-pip", str(root)],
        what="creating a venv",
        exit_code=EXIT_AUDIT,
    )
    interpreter = root / "bin" / "python"
    if inherit:
        query = "import sysconfig; print(sysconfig.get_path('purelib'))"
        own = Path(proc.capture([str(interpreter), "-c", query], exit_code=EXIT_AUDIT).strip())
        lines = [f"import site; site.addsitedir({d!r})" for d in site_dirs(python)]
        (own / PTH_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return interpreter


def install(wheel: Path, interpreter: Path, cwd: Path) -> Path:
    """``wheel`` installed into the venv of ``interpreter``, without its dependencies (those the
    venv sees already are what an install would use); returns ``interpreter``."""
    proc.run(
        [
            sys.executable,  # this tool's pip, pointed at the venv
            "-m",
            "pip",
            "--python",
            str(interpreter),
            "install",
            "--quiet",
            "--no-deps",
            "--ignore-installed",  # (a copy the target interpreter has must not stand in for it)
            "--no-index",
            "--no-compile",
            "--disable-pip-version-check",
            str(wheel.resolve()),
        ],
        what=f"installing {wheel.name} into a fresh venv",
        cwd=cwd,
        exit_code=EXIT_AUDIT,
    )
    return interpreter
