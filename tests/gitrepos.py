"""Small real git repositories for tests: a CMake library, with or without a submodule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "protocol.file.allow",
    "GIT_CONFIG_VALUE_0": "always",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    )
    return out.stdout.strip()


def init_repo(path: Path, files: dict[str, str]) -> str:
    """A repository on branch main with ``files`` committed; returns the commit SHA."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return commit(path, files, "initial")


def commit(path: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


def cmake_library(name: str, body: str = "int answer(void) { return 42; }\n") -> dict[str, str]:
    return {
        "CMakeLists.txt": (
            "cmake_minimum_required(VERSION 3.18)\n"
            f"project({name} LANGUAGES C)\n"
            f"add_library({name} SHARED {name}.c)\n"
            f"install(TARGETS {name} LIBRARY DESTINATION lib)\n"
        ),
        f"{name}.c": body,
    }


RECIPE = "vendors:\n  cpu: {}\noutputs: [lib/lib%s.so]\n"


def stack_for(root: Path, components: dict[str, tuple[str, str]], recipe: str = "") -> Path:
    """A stack.yaml (and recipes) pinning each component to (url, sha); ``recipe`` is more
    recipe text (``submodules: ...``) each recipe starts with."""
    (root / "components").mkdir(parents=True, exist_ok=True)
    lines = ["vendors:", "  cpu: {}", "components:"]
    for name, (url, sha) in components.items():
        lines += [f"  {name}:", f"    git: {url}", f"    rev: {sha}"]
        (root / "components" / f"{name}.yaml").write_text(recipe + RECIPE % name)
    path = root / "stack.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# Public-looking URLs no test can reach: repositories named PUBLIC/<name>.git are served from a
# local directory of <name>.git through ``--mirror`` (fetching) or insteadOf (submodule add).
PUBLIC = "https://example.invalid/org"


def mirror(directory: Path) -> str:
    """The ``--mirror`` value serving PUBLIC/<name>.git from ``directory``/<name>.git."""
    return f"{PUBLIC}/={directory}/"


def public_stack(root: Path, pins: dict[str, str], recipe: str = "") -> Path:
    """``stack_for`` with each component at PUBLIC/<name>.git, pinned to its SHA in ``pins``."""
    return stack_for(root, {n: (f"{PUBLIC}/{n}.git", sha) for n, sha in pins.items()}, recipe)


def add_submodule(top: Path, url: str, path: str, at: str, mirrors: Path) -> None:
    """Add submodule ``url`` (PUBLIC ones come from ``mirrors``) at ``path``, checked out at
    ``at``; the .gitmodules URL stays the public one."""
    git(top, "-c", f"url.{mirrors}/.insteadOf={PUBLIC}/", "submodule", "add", "-q", url, path)
    git(top / path, "checkout", "-q", at)
