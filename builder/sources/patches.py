"""Recipe patches, applied in order with ``git apply`` to a per-build checkout.

Never to the shared git cache: the checkout is a clone of it, and its own index takes the
patched files. The tree id after patching is kept in the checkout's ``.git`` directory, so that a
later build can tell a patched checkout that is intact from one changed underneath.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from builder.core import proc
from builder.core.errors import EXIT_SOURCES, SourceError
from builder.plan import PlannedPatch

STAMP = "infini-stack-patched"  # in the checkout's .git directory: the patched tree id

_FAILED = re.compile(r"patch failed: (?P<file>.+):(?P<line>\d+)$", re.M)
_NOT_FOUND = re.compile(r"error: (?P<file>.+): (?:No such file or directory|does not exist)", re.M)
_FILE = re.compile(r"^\+\+\+ (?:b/)?(?P<file>\S+)", re.M)
_HUNK = re.compile(r"^@@ -(?P<old>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$", re.M)


def apply(
    component: str,
    rev: str,
    tree: Path,
    patches: Sequence[PlannedPatch],
    env: Mapping[str, str] | None = None,
) -> None:
    """Apply ``patches`` in order to the checkout ``tree``; a failure names the patch file and
    its first failing hunk (exit 4)."""
    if not patches:
        return
    for patch in patches:
        result = proc.run(
            ["git", "-C", str(tree), "apply", "--index", "--whitespace=nowarn", str(patch.path)],
            check=False,
            env=env,
        )
        if result.returncode != 0:
            raise SourceError(
                f"patch {patch.name} does not apply to component '{component}' at {rev}: "
                f"{failing_hunk(patch.path.read_text(errors='replace'), result.output)}\n"
                f"{result.output.strip()}",
                hint=f"rebase {patch.path} on that revision (or drop it from the recipe)",
            )
    (git_dir(tree) / STAMP).write_text(_tree_id(tree, env) + "\n", encoding="utf-8")


def changed(tree: Path, env: Mapping[str, str] | None = None) -> str | None:
    """None when a patched checkout is as its patches left it, else what differs."""
    try:
        expected = (git_dir(tree) / STAMP).read_text(encoding="utf-8").strip()
    except OSError:
        return "its patches were never applied"
    if _tree_id(tree, env) != expected:
        return "its index differs from the patched tree"
    dirty = proc.run(
        ["git", "-C", str(tree), "diff", "--quiet", "--ignore-submodules=none"],
        check=False,
        env=env,
    )
    return None if dirty.returncode == 0 else "files differ from the patched tree"


def failing_hunk(text: str, output: str) -> str:
    """Which hunk of the patch ``text`` git's ``output`` says failed, in words."""
    if match := _NOT_FOUND.search(output):
        return f"{match['file']} is not in the checkout"
    failed = _FAILED.search(output)
    if failed is None:
        return "git could not apply it"
    target, line = failed["file"], int(failed["line"])
    number = 0
    current = None
    for match in re.finditer(f"{_FILE.pattern}|{_HUNK.pattern}", text, re.M):
        if match["file"] is not None:
            current = match["file"]
            number = 0
            continue
        number += 1
        if current == target and int(match["old"]) == line:
            return f"hunk {number} of {target} ({match.group(0).strip()}) fails"
    return f"the hunk of {target} at line {line} fails"


def git_dir(tree: Path) -> Path:
    return tree / ".git"


def _tree_id(tree: Path, env: Mapping[str, str] | None) -> str:
    return proc.capture(
        ["git", "-C", str(tree), "write-tree"], env=env, exit_code=EXIT_SOURCES
    ).strip()
