"""Sources for hosts without the network: every pinned source of a vendor's stack in one file.

A bundle is an uncompressed tar (git bundles are compressed already) holding::

    index.json                  what is inside: repositories (URL, member, sha256, commits) and
                                the pins it was made for (component, submodule path, URL, SHA)
    repos/<name>-<hash>.bundle  one git bundle per repository, a ref per needed commit

Using one imports each git bundle into the shared bare cache (checking its sha256 against the
index, git checking every object), then fetches with the network off: every commit the manifest
pins, for components and their submodules, must be found there; the first that is not is an
error naming it. The manifest, not the index, says what is needed.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder import __version__
from builder.core import proc
from builder.core.digest import file_digest
from builder.core.errors import EXIT_SOURCES, CommandFailed, SourceError
from builder.core.layout import Layout
from builder.core.redact import redact, strip_userinfo
from builder.manifest.model import GitSource
from builder.plan import ComponentPlan, Plan
from builder.sources.fetch import Fetcher, git_env

FORMAT = "infini-stack-bundle"
VERSION = 1
INDEX = "index.json"
REF_PREFIX = "refs/infini-stack/pins/"


@dataclass(frozen=True, kw_only=True)
class Pin:
    component: str
    path: str  # "" for the component itself, else the submodule's path inside it
    url: str
    rev: str

    @property
    def label(self) -> str:
        if not self.path:
            return f"component '{self.component}'"
        return f"submodule {self.path} of component '{self.component}'"


@dataclass(frozen=True, kw_only=True)
class Repository:
    url: str
    member: str  # the git bundle's name inside the archive
    sha256: str
    size: int
    commits: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class BundleIndex:
    vendor: str
    manifest: str
    repositories: tuple[Repository, ...]
    pins: tuple[Pin, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "tool": __version__,
            "vendor": self.vendor,
            "manifest": self.manifest,
            "repositories": [
                {
                    "url": strip_userinfo(r.url),
                    "member": r.member,
                    "sha256": r.sha256,
                    "size": r.size,
                    "commits": list(r.commits),
                }
                for r in self.repositories
            ],
            "pins": [
                {
                    "component": p.component,
                    "path": p.path,
                    "url": strip_userinfo(p.url),
                    "rev": p.rev,
                }
                for p in self.pins
            ],
        }


# --- what a plan needs --------------------------------------------------------------------------


def pins_of(component: ComponentPlan, fetcher: Fetcher) -> list[Pin]:
    """A git component's pin and its selected submodules' (recursively), all in the cache."""
    source = component.source
    if not isinstance(source, GitSource):
        return []
    cache = fetcher.ensure_commit(component.name, source)
    pins = [Pin(component=component.name, path="", url=source.url, rev=source.rev)]
    selection = component.submodules
    for sub in fetcher.ensure_submodules(component.name, cache, source, selection):
        pins.append(Pin(component=component.name, path=sub.path, url=sub.url, rev=sub.rev))
    return pins


def needed_pins(plan: Plan, fetcher: Fetcher) -> list[Pin]:
    """Every pin of the plan; with an offline fetcher, every missing one is reported at once."""
    pins: list[Pin] = []
    problems: list[str] = []
    for component in plan.components:
        try:
            pins += pins_of(component, fetcher)
        except SourceError as exc:
            problems.append(exc.message)
    if len(problems) == 1:
        raise SourceError(problems[0], hint=_MISSING_HINT if fetcher.offline else None)
    if problems:
        raise SourceError(
            f"{len(problems)} pins cannot be had:\n" + "\n".join(f"  {p}" for p in problems),
            hint=_MISSING_HINT if fetcher.offline else None,
        )
    return pins


_MISSING_HINT = (
    "make the bundle again from this manifest (`infini-stack bundle --vendor V -o "
    "FILE` where the network or --mirror copies are reachable)"
)


# --- writing ------------------------------------------------------------------------------------


def write_bundle(plan: Plan, layout: Layout, fetcher: Fetcher, out: Path) -> BundleIndex:
    """Fetch every pin of ``plan`` into the cache and write them, with an index, to ``out``."""
    pins = needed_pins(plan, fetcher)
    by_url: dict[str, list[str]] = {}
    for pin in pins:
        revs = by_url.setdefault(pin.url, [])
        if pin.rev not in revs:
            revs.append(pin.rev)
    layout.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bundle-", dir=layout.home) as tmp:
        repos = [
            _git_bundle(layout.git_cache(url), url, revs, Path(tmp)) for url, revs in by_url.items()
        ]
        index = BundleIndex(
            vendor=plan.vendor,
            manifest=plan.stack.label,
            repositories=tuple(repos),
            pins=tuple(pins),
        )
        _write_tar(index, Path(tmp), out)
    return index


def _git_bundle(cache: Path, url: str, revs: list[str], tmp: Path) -> Repository:
    refs = [f"{REF_PREFIX}{rev}" for rev in revs]
    what = f"git bundle of {url}"
    try:
        for ref, rev in zip(refs, revs, strict=True):
            _git(["--git-dir", str(cache), "update-ref", ref, rev], what)
        member = f"repos/{cache.name.removesuffix('.git')}.bundle"
        target = tmp / member
        target.parent.mkdir(parents=True, exist_ok=True)
        _git(["--git-dir", str(cache), "bundle", "create", "--quiet", str(target), *refs], what)
    except CommandFailed as exc:
        raise SourceError(exc.message) from exc
    return Repository(
        url=url,
        member=member,
        sha256=file_digest(target).hex(),
        size=target.stat().st_size,
        commits=tuple(revs),
    )


def _write_tar(index: BundleIndex, root: Path, out: Path) -> None:
    """index.json first, then the git bundles in index order; fixed owners, modes and times."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    blob = (json.dumps(index.to_json(), indent=2) + "\n").encode()
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_tarinfo(INDEX, len(blob)), io.BytesIO(blob))
        for repo in index.repositories:
            path = root / repo.member
            with path.open("rb") as f:
                tar.addfile(_tarinfo(repo.member, path.stat().st_size), f)
    partial.replace(out)


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    info.uname = info.gname = ""
    return info


# --- reading ------------------------------------------------------------------------------------


def read_index(path: Path) -> BundleIndex:
    with _open(path) as tar:
        return _index(tar, path)


def import_bundle(path: Path, layout: Layout) -> BundleIndex:
    """Check every git bundle against the index and fetch it into the shared bare cache."""
    with _open(path) as tar:
        index = _index(tar, path)
        layout.home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="bundle-", dir=layout.home) as tmp:
            for repo in index.repositories:
                extracted = _extract(tar, repo, path, Path(tmp))
                _import(extracted, repo, layout.git_cache(repo.url), path)
    return index


def offline_fetcher(path: Path, layout: Layout) -> Fetcher:
    """Import ``path`` into the cache; the fetcher it returns never uses the network."""
    import_bundle(path, layout)
    return Fetcher(layout, {}, f"the bundle {path}")


def _open(path: Path) -> tarfile.TarFile:
    if not path.is_file():
        raise SourceError(f"bundle {path} does not exist")
    try:
        return tarfile.open(path, "r:")
    except tarfile.TarError as exc:
        raise SourceError(f"{path} is not a source bundle (not a tar archive: {exc})") from exc


def _index(tar: tarfile.TarFile, path: Path) -> BundleIndex:
    try:
        member = tar.extractfile(INDEX)
        data = json.load(member) if member is not None else None
    except (KeyError, ValueError, tarfile.TarError) as exc:
        raise SourceError(f"{path} is not a source bundle (no readable {INDEX}: {exc})") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SourceError(f"{path} is not a source bundle ({INDEX} is not an {FORMAT} index)")
    if data.get("version") != VERSION:
        raise SourceError(
            f"bundle {path} has format version {data.get('version')!r}; "
            f"this tool reads version {VERSION}"
        )
    try:
        repos = tuple(
            Repository(
                url=str(r["url"]),
                member=str(r["member"]),
                sha256=str(r["sha256"]),
                size=int(r["size"]),
                commits=tuple(str(c) for c in r["commits"]),
            )
            for r in data["repositories"]
        )
        pins = tuple(
            Pin(
                component=str(p["component"]),
                path=str(p["path"]),
                url=str(p["url"]),
                rev=str(p["rev"]),
            )
            for p in data["pins"]
        )
        return BundleIndex(
            vendor=str(data["vendor"]),
            manifest=str(data["manifest"]),
            repositories=repos,
            pins=pins,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"bundle {path}: malformed {INDEX} ({exc!r})") from exc


def _extract(tar: tarfile.TarFile, repo: Repository, path: Path, tmp: Path) -> Path:
    """The member as a file under ``tmp`` (never where its name points), checked by sha256."""
    try:
        source = tar.extractfile(repo.member)
    except KeyError:
        source = None
    if source is None:
        raise SourceError(
            f"bundle {path} lacks {repo.member} ({repo.url}) that its index lists",
            hint="the bundle is damaged; make it again",
        )
    target = tmp / hashlib.sha256(repo.member.encode()).hexdigest()
    with target.open("wb") as f:
        shutil.copyfileobj(source, f)
    digest = file_digest(target).hex()
    if digest != repo.sha256:
        raise SourceError(
            f"bundle {path}: {repo.member} ({repo.url}) does not match its index: "
            f"sha256 {digest}, the index says {repo.sha256}",
            hint="the bundle was altered or damaged in transit; make or copy it again",
        )
    return target


def _import(bundle: Path, repo: Repository, cache: Path, path: Path) -> None:
    what = f"import of {repo.url} from bundle {path}"
    try:
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=cache.name + ".", dir=cache.parent))
            _git(["init", "--bare", "--quiet", str(tmp)], what)
            tmp.rename(cache)
        # Every object is checked (fsck) as it is indexed; the refs keep the commits from gc.
        _git(
            [
                "--git-dir",
                str(cache),
                "-c",
                "fetch.fsckObjects=true",
                "fetch",
                "--quiet",
                str(bundle),
                f"+{REF_PREFIX}*:{REF_PREFIX}*",
            ],
            what,
        )
    except CommandFailed as exc:
        raise SourceError(
            f"bundle {path}: {repo.member} ({repo.url}) cannot be imported:\n{exc.tail}",
            hint="the bundle is damaged; make it again",
        ) from exc


def _git(args: list[str], what: str) -> str:
    return proc.run(["git", *args], what=what, env=git_env({}), exit_code=EXIT_SOURCES).output


def describe(index: BundleIndex) -> Iterator[str]:
    """Human lines: one per pin, then the repositories with their sizes."""
    for pin in index.pins:
        yield f"{pin.rev}  {pin.label}  {redact(pin.url)}"
    total = sum(r.size for r in index.repositories)
    yield (
        f"{len(index.repositories)} repositories, {len(index.pins)} pins, "
        f"{total / 1e6:.1f} MB of git bundles"
    )
