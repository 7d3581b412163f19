"""Local git working trees in the build: ``--worktree COMPONENT=DIR`` builds a component from a
maintainer's checkout instead of its pin, keyed by the tree's HEAD and its uncommitted changes;
``--worktree infinicore=DIR`` takes every submodule of a local InfiniCore checkout, which must be
initialised, at its gitlinks and clean, as upstream's builder requires."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from pathlib import Path

from builder.core import proc
from builder.core.errors import EXIT_SOURCES, SourceError, UsageError
from builder.manifest.model import Component, GitSource, Stack, VendorOverride, WorktreeSource
from builder.manifest.schema import unknown_message

SUPERPROJECT = "infinicore"


def parse(specs: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for spec in specs:
        name, sep, directory = spec.partition("=")
        if not sep or not name or not directory:
            raise UsageError(f"--worktree expects COMPONENT=DIR, got '{spec}'")
        out[name] = Path(directory).expanduser().resolve()
    return out


def _git(tree: Path, *args: str) -> str:
    return proc.run(
        ["git", "-C", str(tree), *args],
        what=f"git {args[0]} in {tree}",
        exit_code=EXIT_SOURCES,
    ).output


def source_of(tree: Path) -> WorktreeSource:
    """The tree's identity: its HEAD, and a hash of what differs from it (tracked changes as
    ``git diff HEAD --binary`` shows them, untracked files that are not ignored, by content)."""
    if not (tree / ".git").exists():
        raise SourceError(f"--worktree {tree}: not the top of a git working tree")
    head = _git(tree, "rev-parse", "HEAD").strip()
    diff = _git(tree, "diff", "HEAD", "--binary", "--no-ext-diff", "--ignore-submodules=all")
    untracked = _git(tree, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    h = hashlib.sha256(diff.encode())
    for rel in sorted(name for name in untracked if name):
        h.update(b"\0" + rel.encode() + b"\0" + (tree / rel).read_bytes())
    changed = bool(diff) or any(untracked)
    return WorktreeSource(path=tree, head=head, diff=h.hexdigest() if changed else "")


def submodule_trees(top: Path) -> list[tuple[str, str, Path]]:
    """(url, gitlink, directory) of each submodule a superproject checkout records; one
    SourceError listing every submodule that is uninitialised, off its gitlink, or dirty."""
    status = _git(top, "submodule", "status")
    problems: list[str] = []
    found: list[tuple[str, str, Path]] = []
    for line in status.splitlines():
        if not line.strip():
            continue
        mark, rest = line[0], line[1:].split()
        path = rest[1]
        gitlink = _git(top, "ls-tree", "HEAD", path).split()[2]
        url = _git(top, "config", "--file", ".gitmodules", "--get", f"submodule.{path}.url").strip()
        tree = top / path
        if mark == "-":
            problems.append(f"{path}: not initialised (git submodule update --init {path})")
            continue
        if mark == "+":
            head = rest[0]
            problems.append(f"{path}: HEAD {head[:12]} is not the gitlink {gitlink[:12]}")
        if _git(tree, "status", "--porcelain"):
            problems.append(f"{path}: uncommitted changes")
        found.append((url, gitlink, tree))
    if problems:
        raise SourceError(
            f"--worktree {SUPERPROJECT}={top}: its submodules are not as its commit records:\n"
            + "\n".join(f"  {p}" for p in problems),
            hint="initialise, check out the gitlinks and commit or stash, or give the "
            "submodules one by one with --worktree COMPONENT=DIR",
        )
    return found


def expand(stack: Stack, requested: Mapping[str, Path]) -> dict[str, Path]:
    """Component -> tree; ``infinicore=DIR`` becomes its submodules, each given to the
    component whose repository it is."""
    from builder.sources.contract import same_repository

    out: dict[str, Path] = {}
    for name, tree in requested.items():
        if name != SUPERPROJECT or name in stack.components:
            out[name] = tree
            continue
        for url, _gitlink, sub in submodule_trees(tree):
            owner = next(
                (
                    n
                    for n, c in stack.components.items()
                    if c.borrows is None
                    and isinstance(c.source, GitSource)
                    and same_repository(c.source.url, url)
                ),
                None,
            )
            if owner is not None:
                out.setdefault(owner, sub)
    return out


def apply(stack: Stack, vendor: str, specs: tuple[str, ...]) -> Stack:
    """``stack`` with each named component's ``vendor`` source replaced by its working tree."""
    if not specs:
        return stack
    trees = expand(stack, parse(specs))
    components = dict(stack.components)
    for name, tree in trees.items():
        if name not in components:
            raise UsageError(unknown_message("component", name, components))
        if (lender := components[name].borrows) is not None:
            raise UsageError(
                f"{name} builds {lender}'s checkout (source: {lender}): "
                f"give --worktree {lender}={tree}, which both build"
            )
        source = source_of(tree)
        for each in (name, *(n for n, c in components.items() if c.borrows == name)):
            components[each] = _with_source(components[each], vendor, source)
    return dataclasses.replace(stack, components=components)


def _with_source(component: Component, vendor: str, source: WorktreeSource) -> Component:
    overrides = dict(component.overrides)
    old = overrides.get(vendor)
    overrides[vendor] = VendorOverride(
        source=source, options=old.options if old else {}, reason=None
    )
    return dataclasses.replace(component, overrides=overrides)


def worktrees(sources: Mapping[str, object]) -> dict[str, WorktreeSource]:
    """The working-tree sources among ``sources`` (component -> source)."""
    return {n: s for n, s in sources.items() if isinstance(s, WorktreeSource)}
