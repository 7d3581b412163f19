"""Pinned, verified source trees: a shared bare git cache, one checkout per build, never shared.

Upstream writes generated/ into its source trees at configure time, so every build gets its own
checkout; the cache is only ever fetched into. Mirrors rewrite repository URLs (prefix match, as
git's ``insteadOf``) so a host without the network can fetch from local copies.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.core import proc
from builder.core.digest import file_digest, tree_digest
from builder.core.errors import EXIT_SOURCES, CommandFailed, SourceError
from builder.core.layout import Layout
from builder.manifest.model import GitSource, PathSource, Stack, WorktreeSource
from builder.manifest.recipes import key_bytes
from builder.plan import ComponentPlan, Inputs
from builder.sources import patches


def gather(stack: Stack, vendor: str, names: tuple[str, ...] | None = None) -> Inputs:
    """Read what planning needs from the disk: source identities and recipe digests of
    ``names`` (default: the vendor's whole stack)."""
    source_ids: dict[str, str] = {}
    recipe_digests: dict[str, str] = {}
    patch_digests: dict[Path, str] = {}
    for name in names or stack.names_for(vendor):
        component = stack.components[name]
        source = component.source_for(vendor)
        if isinstance(source, WorktreeSource):
            source_ids[name] = source.identity  # its HEAD and its changes, as git sees them
        elif isinstance(source, PathSource):
            if not source.path.is_dir():
                raise SourceError(f"component '{name}': path source {source.path} does not exist")
            source_ids[name] = f"path:{tree_digest(source.path)}"
        else:
            source_ids[name] = source.identity
        recipe = component.recipe
        h = hashlib.sha256(key_bytes(recipe.file))
        if recipe.project is not None:
            h.update(tree_digest(recipe.project).encode())
        recipe_digests[name] = h.hexdigest()
        for patch in recipe.patches_for(vendor):
            patch_digests[patch.path] = file_digest(patch.path).hex()
    return Inputs(source_ids=source_ids, recipe_digests=recipe_digests, patch_digests=patch_digests)


# --- mirrors ------------------------------------------------------------------------------------


def parse_mirrors(specs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``URL=DIR`` pairs from the command line; DIR may also be a URL."""
    out: dict[str, str] = {}
    for spec in specs:
        url, sep, target = spec.partition("=")
        if not sep or not url or not target:
            raise SourceError(f"--mirror expects URL=DIR, got '{spec}'")
        if "://" not in target:
            slash = "/" if target.endswith("/") else ""
            target = str(Path(target).expanduser().resolve()) + slash
        out[url] = target
    return out


def rewrite(url: str, mirrors: Mapping[str, str]) -> str:
    """Apply the longest matching mirror prefix, as git's url.<base>.insteadOf does."""
    best = max((m for m in mirrors if url.startswith(m)), key=len, default=None)
    return mirrors[best] + url[len(best) :] if best is not None else url


def git_env(mirrors: Mapping[str, str]) -> dict[str, str]:
    """Environment for git: never prompt; mirrors as insteadOf so submodules follow them too."""
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    config = [("protocol.file.allow", "always"), ("advice.detachedHead", "false")]
    config += [(f"url.{target}.insteadOf", url) for url, target in mirrors.items()]
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (k, v) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = v
    return env


# --- submodules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submodule:
    name: str  # the key in .gitmodules
    path: str  # inside the superproject
    url: str  # absolute: relative URLs are resolved against the superproject's URL
    rev: str  # the gitlink


def resolve_submodule_url(url: str, parent_url: str) -> str:
    """``../json.git`` relative to the superproject's URL, as git resolves it."""
    if not url.startswith(("./", "../")):
        return url
    base = parent_url.rstrip("/")
    for part in url.split("/"):
        if part == "..":
            base = base.rsplit("/", 1)[0] if "/" in base.split("://", 1)[-1] else base
        elif part not in (".", ""):
            base = f"{base}/{part}"
    return base


# --- fetching -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fetcher:
    """Fetches pins into the shared bare cache and checks them out per build.

    ``offline`` names where sources come from when the network must not be used (e.g. "bundle
    X"): then a commit missing from the cache is an error instead of a fetch.
    """

    layout: Layout
    mirrors: Mapping[str, str]
    offline: str | None = None

    def _git(self, args: list[str], what: str, cwd: Path | None = None) -> str:
        return proc.run(
            ["git", *args], what=what, cwd=cwd, env=git_env(self.mirrors), exit_code=EXIT_SOURCES
        ).output

    def has_commit(self, repo: Path, rev: str) -> bool:
        result = proc.run(
            ["git", "--git-dir", str(repo), "cat-file", "-e", f"{rev}^{{commit}}"],
            check=False,
            env=git_env(self.mirrors),
        )
        return result.returncode == 0

    def ensure_commit(self, name: str, source: GitSource, *, label: str | None = None) -> Path:
        """The bare cache for ``source.url`` holding ``source.rev``; fetches only when missing.

        ``label`` names what is fetched in messages (default: ``component 'NAME'``).
        """
        label = label or f"component '{name}'"
        cache = self.layout.git_cache(source.url)
        if self.offline is not None:
            if cache.exists() and self.has_commit(cache, source.rev):
                return cache
            raise SourceError(
                f"commit {source.rev} of {label} ({source.url}) is not in {self.offline}",
                hint="make the bundle again from a manifest with this pin "
                "(`infini-stack bundle`), or fetch with the network",
            )
        url = rewrite(source.url, self.mirrors)
        where = f"{label} ({url} @ {source.rev})"
        try:
            if not cache.exists():
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=cache.name + ".", dir=cache.parent))
                self._git(["clone", "--bare", "--quiet", url, str(tmp)], f"git clone of {where}")
                tmp.rename(cache)
            if self.has_commit(cache, source.rev):
                return cache
            self._git(
                [
                    "--git-dir",
                    str(cache),
                    "fetch",
                    "--quiet",
                    "--tags",
                    url,
                    "+refs/heads/*:refs/heads/*",
                ],
                f"git fetch of {where}",
            )
            if not self.has_commit(cache, source.rev):
                # Servers that allow it can serve an unadvertised commit by its SHA.
                proc.run(
                    ["git", "--git-dir", str(cache), "fetch", "--quiet", url, source.rev],
                    check=False,
                    env=git_env(self.mirrors),
                )
        except CommandFailed as exc:
            raise SourceError(
                f"cannot fetch {where}:\n{exc.tail}",
                hint="check the URL and the network, or give a local copy with --mirror URL=DIR",
            ) from exc
        if not self.has_commit(cache, source.rev):
            raise SourceError(
                f"commit {source.rev} of {label} is not in {url}",
                hint="the pin may be wrong or the branch holding it was rewritten; "
                "check it with `git ls-remote`, or re-pin with `infini-stack lock`",
            )
        return cache

    def submodules(
        self, cache: Path, source: GitSource, selection: frozenset[str] | None = None
    ) -> list[Submodule]:
        """The submodules recorded at ``source.rev`` (read from the bare cache, no checkout)."""
        rev = source.rev
        listed = proc.run(
            ["git", "--git-dir", str(cache), "cat-file", "-e", f"{rev}:.gitmodules"],
            check=False,
            env=git_env(self.mirrors),
        )
        if listed.returncode != 0:
            return []
        what = f"submodules of {source.url} at {rev}"
        found_config = proc.run(
            [
                "git",
                "--git-dir",
                str(cache),
                "config",
                "--blob",
                f"{rev}:.gitmodules",
                "--get-regexp",
                r"^submodule\..*\.(path|url)$",
            ],
            what=what,
            check=False,
            env=git_env(self.mirrors),
        )
        if found_config.returncode == 1:  # a .gitmodules that lists no submodule (CUTLASS)
            return []
        if found_config.returncode != 0:
            raise SourceError(f"{what}: .gitmodules cannot be read:\n{found_config.output}")
        config = found_config.output
        paths: dict[str, str] = {}
        urls: dict[str, str] = {}
        for line in config.splitlines():
            key, _, value = line.partition(" ")
            name, _, field = key.removeprefix("submodule.").rpartition(".")
            (paths if field == "path" else urls)[name] = value.strip()
        tree = self._git(["--git-dir", str(cache), "ls-tree", "-r", "-z", rev], what)
        gitlinks: dict[str, str] = {}
        for entry in tree.split("\0"):
            meta, _, path = entry.partition("\t")
            fields = meta.split()
            if len(fields) == 3 and fields[0] == "160000":
                gitlinks[path] = fields[2]
        found: list[Submodule] = []
        for name, path in sorted(paths.items(), key=lambda item: item[1]):
            if path not in gitlinks or name not in urls:
                continue  # listed in .gitmodules but not recorded in the tree
            if selection is not None and path.strip("/") not in selection:
                continue
            url = resolve_submodule_url(urls[name], source.url)
            found.append(Submodule(name=name, path=path, url=url, rev=gitlinks[path]))
        return found

    def ensure_submodules(
        self,
        owner: str,
        cache: Path,
        source: GitSource,
        selection: frozenset[str] | None = None,
        prefix: str = "",
    ) -> list[Submodule]:
        """Every selected submodule, recursively, fetched into the cache; nested ones carry
        their full path (``a/b``)."""
        out: list[Submodule] = []
        for sub in self.submodules(cache, source, selection):
            path = f"{prefix}{sub.path}"
            sub_source = GitSource(url=sub.url, rev=sub.rev)
            sub_cache = self.ensure_commit(
                owner, sub_source, label=f"submodule {path} of component '{owner}'"
            )
            out.append(Submodule(name=sub.name, path=path, url=sub.url, rev=sub.rev))
            out += self.ensure_submodules(owner, sub_cache, sub_source, None, f"{path}/")
        return out

    def checkout(self, component: ComponentPlan) -> Path:
        """A verified checkout at the pin (with submodules) for this build; reused if intact."""
        source = component.source
        assert isinstance(source, GitSource)
        tree = component.source_dir
        if tree.exists():
            self.verify(component.name, tree, source.rev, patched=bool(component.patches))
            return tree
        cache = self.ensure_commit(component.name, source)
        tree.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=tree.name + ".", dir=tree.parent))
        try:
            what = f"checkout of component '{component.name}' at {source.rev}"
            self._git(["clone", "--quiet", "--shared", "--no-checkout", str(cache), str(tmp)], what)
            self._git(["-C", str(tmp), "remote", "set-url", "origin", source.url], what)
            self._git(["-C", str(tmp), "checkout", "--quiet", "--detach", source.rev], what)
            selection = component.submodules
            self._checkout_submodules(component.name, tmp, cache, source, selection, "")
            self.verify(component.name, tmp, source.rev, cache=cache)
            env = git_env(self.mirrors)
            patches.apply(component.name, source.rev, tmp, component.patches, env)
            tmp.rename(tree)
        except CommandFailed as exc:
            raise SourceError(exc.message) from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return tree

    def _checkout_submodules(
        self,
        owner: str,
        tree: Path,
        cache: Path,
        source: GitSource,
        selection: frozenset[str] | None,
        prefix: str,
    ) -> None:
        """Check out each submodule at its gitlink from the shared cache (mirrors and bundles
        apply to submodules as to components); the checkout keeps the public URLs."""
        for sub in self.submodules(cache, source, selection):
            label = f"submodule {prefix}{sub.path} of component '{owner}'"
            sub_source = GitSource(url=sub.url, rev=sub.rev)
            sub_cache = self.ensure_commit(owner, sub_source, label=label)
            what = f"checkout of {label} at {sub.rev}"
            key = f"submodule.{sub.name}.url"
            self._git(["-C", str(tree), "config", key, str(sub_cache)], what)
            self._git(
                ["-C", str(tree), "submodule", "update", "--init", "--quiet", "--", sub.path], what
            )
            self._git(["-C", str(tree), "config", key, sub.url], what)
            self._git(["-C", str(tree / sub.path), "remote", "set-url", "origin", sub.url], what)
            self._checkout_submodules(
                owner, tree / sub.path, sub_cache, sub_source, None, f"{prefix}{sub.path}/"
            )

    def _verify_patched(self, name: str, tree: Path) -> None:
        if problem := patches.changed(tree, git_env(self.mirrors)):
            raise SourceError(
                f"patched source tree of component '{name}' changed underneath: {problem} ({tree})",
                hint=f"remove {tree} to check it out and patch it again",
            )

    def verify(
        self,
        name: str,
        tree: Path,
        rev: str,
        *,
        cache: Path | None = None,
        patched: bool = False,
    ) -> None:
        """HEAD must equal the pin, submodules their gitlinks, and nothing tracked may differ
        (from the patched tree, when the recipe has ``patched`` it).

        ``cache``: the tree was just checked out from that git cache, so a difference is no
        change underneath but a cache that lacks objects (git checks out around a missing blob
        and still exits 0).
        """
        head = self._git(["-C", str(tree), "rev-parse", "HEAD"], f"git in {tree}").strip()
        if head != rev:
            raise SourceError(
                f"source tree of component '{name}' changed underneath: HEAD is {head}, "
                f"the pin is {rev} ({tree})",
                hint=f"remove {tree} to check it out again",
            )
        if patched:
            self._verify_patched(name, tree)
            return
        status = self._git(
            [
                "-C",
                str(tree),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--ignore-submodules=none",
            ],
            f"git status in {tree}",
        )
        if not status.strip():
            return
        lines = status.splitlines()
        deleted = [line[3:] for line in lines if "D" in line[:2]]
        modified = [line[3:] for line in lines if "D" not in line[:2]]
        parts = [
            f"{label} {', '.join(paths[:5])}" + (" ..." if len(paths) > 5 else "")
            for label, paths in (("missing", deleted), ("modified", modified))
            if paths
        ]
        if cache is not None:
            raise SourceError(
                f"the checkout of component '{name}' at {rev} is incomplete ({'; '.join(parts)}): "
                f"the git cache {cache} lacks objects of that commit (a partial clone or mirror?)",
                hint=f"remove {cache} to fetch it again, from a complete repository or mirror",
            )
        raise SourceError(
            f"source tree of component '{name}' changed underneath: {'; '.join(parts)} ({tree})",
            hint=f"remove {tree} to check it out again",
        )


def prepare(
    plan_components: tuple[ComponentPlan, ...],
    layout: Layout,
    mirrors: Mapping[str, str],
    *,
    offline: str | None = None,
) -> dict[str, Path]:
    """Make every git component's per-build source tree ready; path sources are used as they are.

    With ``offline`` (see :class:`Fetcher`) nothing is fetched from the network.
    """
    fetcher = Fetcher(layout, mirrors, offline)
    trees: dict[str, Path] = {}
    for component in plan_components:
        if isinstance(component.source, GitSource):
            trees[component.name] = fetcher.checkout(component)
        else:
            trees[component.name] = component.source_dir
    return trees
