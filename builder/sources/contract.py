"""The contract: a superproject's gitlinks (InfiniCore's), and the components they pin."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from builder.manifest.model import GitSource, Stack
from builder.sources.fetch import Fetcher, Submodule

INFINICORE_URL = "https://github.com/InfiniTensor/InfiniCore.git"


def same_repository(a: str, b: str) -> bool:
    """``https://github.com/X/Y.git`` and ``https://github.com/x/y`` name one repository."""

    def norm(url: str) -> str:
        return url.strip().rstrip("/").removesuffix(".git").lower()

    return norm(a) == norm(b)


@dataclass(frozen=True, kw_only=True)
class Gitlink:
    component: str | None  # the component whose default source is this repository; None: none
    submodule: Submodule


def gitlinks(stack: Stack, fetcher: Fetcher, source: GitSource, label: str) -> list[Gitlink]:
    """The superproject's submodules at ``source.rev``, each with the component it pins."""
    cache = fetcher.ensure_commit(label, source, label=f"contract '{label}'")
    out: list[Gitlink] = []
    for sub in fetcher.submodules(cache, source):
        owner = next(
            (
                name
                for name, c in stack.components.items()
                if isinstance(c.source, GitSource) and same_repository(c.source.url, sub.url)
            ),
            None,
        )
        out.append(Gitlink(component=owner, submodule=sub))
    return out


def contract_block(name: str, url: str, rev: str, pins: Mapping[str, str]) -> str:
    lines = [
        "contract:",
        f"  # {name}'s gitlinks at rev: `infini-stack lock --from {name}=REF` rewrites this block.",
        "  # A pin that differs from them says why with `reason:` beside its rev.",
        f"  {name}:",
        f"    git: {url}",
        f"    rev: {rev}",
        "    pins:",
        *(f"      {component}: {sha}" for component, sha in pins.items()),
    ]
    return "\n".join(lines) + "\n"
