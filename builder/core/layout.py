"""Where state lives: everything under ``$INFINI_STACK_HOME``, never inside component sources."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder import noop
from builder.core.redact import strip_userinfo

HOME_ENV = noop.HOME_ENV
STORE_ENV = "INFINI_STACK_STORE"


def default_home(env: Mapping[str, str]) -> Path:
    return Path(noop.default_home(env))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


@dataclass(frozen=True)
class Layout:
    home: Path
    store_root: Path

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        home: Path | None = None,
        store: Path | None = None,
    ) -> Layout:
        env = os.environ if env is None else env
        root = (home or default_home(env)).resolve()
        store_env = env.get(STORE_ENV)
        store_root = store or (Path(store_env) if store_env else root / "store")
        return cls(home=root, store_root=store_root.resolve())

    def git_cache(self, url: str) -> Path:
        url = strip_userinfo(url)  # the repository, whatever credentials reach it
        digest = hashlib.sha256(url.encode()).hexdigest()[:10]
        name = _slug(url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
        return self.home / "git" / f"{name}-{digest}.git"

    def source_tree(self, component: str, key: str) -> Path:
        return self.home / "src" / f"{component}-{key[:16]}"

    def build_dir(self, component: str, key: str) -> Path:
        return self.home / "build" / f"{component}-{key[:16]}"

    def incremental_build_dir(
        self, component: str, vendor: str, source: Path, lane: str = ""
    ) -> Path:
        """A path source's build directory; ``lane`` (an interpreter tag) changes its digest and
        not its length: CMake rewrites an installed RUNPATH in the space the build tree's took,
        so a wheel is reproducible only from build directories of one length."""
        seed = f"{source}\0{lane}" if lane else str(source)
        digest = hashlib.sha256(seed.encode()).hexdigest()[:12]
        return self.home / "build" / f"{component}-{vendor}-dev-{digest}"

    def entry(self, key: str) -> Path:
        return self.store_root / key[:32]

    def entry_prefix(self, key: str) -> Path:
        return self.entry(key) / "prefix"

    def incoming(self) -> Path:
        return self.store_root / ".incoming"

    def staging(self, key: str) -> Path:
        """Where an entry is assembled before it is renamed to :meth:`entry`."""
        return self.incoming() / key[:32]

    def staging_prefix(self, key: str) -> Path:
        return self.staging(key) / "prefix"

    def runs(self) -> Path:
        return self.home / "runs"

    def logs(self, run_id: str) -> Path:
        return self.home / "logs" / run_id

    def locks(self) -> Path:
        """Locks on what lives under the home (build directories)."""
        return self.home / "locks"

    def entry_locks(self) -> Path:
        """Locks on store entries live with the store, which homes may share."""
        return self.store_root / ".locks"

    def cache(self) -> Path:
        """Small caches that only make things faster (no-op memos, probe results, digests)."""
        return self.home / "cache"

    def presets(self, vendor: str, component: str) -> Path:
        return self.home / "presets" / f"{component}-{vendor}"
