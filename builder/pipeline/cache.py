"""The remote cache in a build: pull what the store lacks before anything compiles, push what
was built here after.

A pull holds the entry's lock (a try: an entry another process is building or pulling is left
to the executor, which waits for it), stages the entry aside in ``.incoming/``, and commits it
with its record written last, as a local build does; anything that goes wrong removes the
staging directory, so nothing of a refused or broken entry is left. A cache that is down, slow
or refusing is a warning and the component is built here (``--cache-required``: an error).
``gc`` never touches a remote.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.cache import urls as cache_urls
from builder.cache.remote import Refused, Remote, Unavailable
from builder.cache.signing import Signer, Trust, signer_from, trust_from
from builder.cache.transfer import Stuck, lookup, open_remote, publish
from builder.cache.transfer import download as download_entry
from builder.core.errors import BuildError, UsageError
from builder.core.layout import Layout
from builder.engine.report import RunReport
from builder.engine.store import Store, Verdict, entry_name
from builder.pipeline.requests import CacheRequest
from builder.plan import ComponentPlan, Plan

PULL_WORKERS = 4
Say = Callable[[str, str], None]  # (component, text)


@dataclass
class Cache:
    remotes: tuple[Remote, ...]
    trust: Trust
    signer: Signer | None
    push: bool
    required: bool
    down: set[str] = field(default_factory=set)  # caches found unavailable in this run
    warnings: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def warn(self, text: str) -> None:
        with self.lock:
            self.warnings.append(text)


def open_cache(
    request: CacheRequest, manifest_urls: tuple[str, ...], manifest_trust: tuple[str, ...]
) -> Cache | None:
    """The caches this build uses (None: none), their trusted keys and the signing key."""
    env = os.environ
    urls = cache_urls.resolve(request.urls, env, manifest_urls)
    if not urls:
        if request.push:
            raise UsageError(
                "--push needs a cache to push to",
                hint=f"give --cache URL, set ${cache_urls.CACHE_ENV}, or list caches in "
                "stack.yaml's cache:",
            )
        return None
    trust = trust_from((*manifest_trust, *request.trust))
    signer = signer_from(request.sign_key, env) if request.push else None
    remotes = tuple(open_remote(u, env) for u in urls)
    return Cache(remotes, trust, signer, request.push, request.required)


def roots(layout: Layout) -> dict[str, str]:
    return {"store": str(layout.store_root), "home": str(layout.home)}


# --- pull ---------------------------------------------------------------------------------------


def pull_missing(cache: Cache, plan: Plan, layout: Layout, say: Say) -> dict[str, dict[str, Any]]:
    """Pull every planned component the store lacks and some cache has; name -> what came."""
    store = Store(layout)
    missing = [c for c in plan.components if not store.has(c.key)]
    if not missing or not cache.remotes:
        return {}
    with ThreadPoolExecutor(min(PULL_WORKERS, len(missing)), "pull") as pool:
        results = list(pool.map(lambda c: _pull_one(cache, c, layout, say), missing))
    return {c.name: got for c, got in zip(missing, results, strict=True) if got is not None}


def _pull_one(cache: Cache, c: ComponentPlan, layout: Layout, say: Say) -> dict[str, Any] | None:
    store = Store(layout)
    with store.try_lock(entry_name(c.key)) as locked:
        if not locked or store.has(c.key):
            return None  # another process builds or pulls it: the executor waits for it
        for remote in cache.remotes:
            if remote.display in cache.down:
                continue
            try:
                got = _pull_from(remote, cache.trust, c, store)
            except Refused as exc:
                say(c.name, f"cache: refused {remote.display}'s entry {c.short_key}: {exc.message}")
                continue
            except Unavailable as exc:
                _unavailable(cache, remote, exc, say, c.name)
                continue
            if got is not None:
                say(
                    c.name,
                    f"pulled from {remote.display} ({got['bytes'] / 1e6:.2f} MB, "
                    f"{got['seconds']:.1f}s{_relocated(got)})",
                )
                return got
    return None


def _relocated(got: Mapping[str, Any]) -> str:
    return f", {got['relocated']} files relocated" if got.get("relocated") else ""


def _pull_from(
    remote: Remote, trust: Trust, c: ComponentPlan, store: Store
) -> dict[str, Any] | None:
    start = time.monotonic()
    found = lookup(remote, c.key, trust)
    if found is None:
        return None
    staging = store.begin(c.key)
    try:
        record = download_entry(found, staging, staging, roots(store.layout))
        store.commit(c.key, record)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "cache": remote.display,
        "manifest": found.manifest_digest,
        "signer": found.signer,
        "bytes": found.layer.size,
        "seconds": round(time.monotonic() - start, 3),
        "relocated": len(record["origin"]["relocated"]),
    }


def _unavailable(cache: Cache, remote: Remote, exc: Unavailable, say: Say, name: str) -> None:
    if cache.required:
        raise BuildError(f"cache {remote.display} is required: {exc.message}", hint=exc.hint)
    with cache.lock:
        first = remote.display not in cache.down
        cache.down.add(remote.display)
    if first:
        text = f"warning: cache unavailable, building locally: {exc.message}"
        cache.warn(text)
        say(name, text)


def mark_pulled(report: RunReport, pulled: Mapping[str, dict[str, Any]], seconds: float) -> None:
    """The components pulled before the build are 'pulled', not store hits; the run's time
    includes the pulls'."""
    report.seconds = round(report.seconds + seconds, 3)
    if not pulled:
        return
    for result in report.components:
        got = pulled.get(result.name)
        if got is not None and result.status == "hit":
            result.status = "pulled"
            result.seconds = got["seconds"]
            result.steps = {"pull": got["seconds"]}
            result.cache = dict(got)


# --- push ---------------------------------------------------------------------------------------


def push_built(cache: Cache, plan: Plan, layout: Layout, report: RunReport, say: Say) -> bool:
    """Upload every entry of the plan built on this machine that the first cache lacks;
    False when a push failed."""
    if not cache.push or not cache.remotes:
        return True
    remote = cache.remotes[0]
    if cache.trust.required and cache.signer is None:
        text = (
            f"warning: nothing pushed to {remote.display}: its entries must be signed and no "
            "signing key was given (--sign-key FILE or $INFINI_STACK_CACHE_SIGNING_KEY)"
        )
        cache.warn(text)
        say("cache", text)
        return False
    ok = True
    store = Store(layout)
    for c in plan.components:
        result = report.result(c.name)
        if result.status not in ("built", "hit") or not store.has(c.key):
            continue
        if remote.display in cache.down:  # said once: each try would wait out its retries
            result.cache = {"error": f"{remote.display} is unavailable"}
            ok = False
            continue
        with store.lock(c.key):
            record = store.record(c.key)
            if "origin" in record:
                continue  # pulled: it is in a cache already
            verdict = store.verify(entry_name(c.key))
            if verdict.ok:
                outcome = _push_one(cache, remote, c, layout, record, say)
            else:
                outcome = _not_pushed(verdict, say)
        result.cache = outcome
        ok = ok and "error" not in outcome
    return ok


def _not_pushed(verdict: Verdict, say: Say) -> dict[str, Any]:
    """An entry whose files differ from its install manifest is never pushed (and signed)."""
    say(verdict.component, "\n".join([*verdict.lines(), "  not pushed"]))
    return {
        "not_pushed": "changed",
        "error": f"store entry {verdict.name} does not match its install manifest",
        "differences": [d.to_json() for d in verdict.differences],
    }


def _push_one(
    cache: Cache,
    remote: Remote,
    c: ComponentPlan,
    layout: Layout,
    record: dict[str, Any],
    say: Say,
) -> dict[str, Any]:
    built = _built_roots(record, layout)
    layout.incoming().mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="push-", dir=layout.incoming()) as scratch:
            entry = layout.entry(c.key)
            published = publish(remote, c.key, entry, record, built, cache.signer, Path(scratch))
    except Stuck as exc:
        lines = [f"  {place}" for place in exc.places]
        say(
            c.name,
            "not pushed: it names the paths it was built under where they cannot be "
            "rewritten (built with -ffile-prefix-map, they would not be there):\n"
            + "\n".join(lines),
        )
        return {"not_pushed": "unrelocatable", "stuck": [str(p) for p in exc.places]}
    except Unavailable as exc:
        if cache.required:
            raise BuildError(
                f"cache {remote.display} is required: {exc.message}", hint=exc.hint
            ) from None
        text = f"warning: not pushed to {remote.display}: {exc.message}"
        cache.down.add(remote.display)
        cache.warn(text)
        say(c.name, text)
        return {"error": exc.message}
    if published is None:
        return {"pushed": remote.display, "existed": True, "bytes": 0}
    say(c.name, f"pushed to {remote.display} ({published.bytes / 1e6:.2f} MB)")
    return {
        "pushed": remote.display,
        "manifest": published.manifest_digest,
        "bytes": published.bytes,
        "relocations": published.relocations,
        "signer": cache.signer.key_id if cache.signer else None,
    }


def _built_roots(record: Mapping[str, Any], layout: Layout) -> dict[str, str]:
    """The store and home an entry was built under (a shared store's entry may come from
    another home), read from its record; else this layout's."""
    from builder.pipeline.reproduce import built_under

    under = built_under(dict(record))
    if under is None:
        return roots(layout)
    home, store = under
    return {"store": str(store), "home": str(home)}


def summary(cache: Cache) -> dict[str, Any]:
    return {
        "caches": [r.display for r in cache.remotes],
        "trusted": sorted(cache.trust.keys),
        "push": cache.push,
        "signer": cache.signer.key_id if cache.signer else None,
        "unavailable": sorted(cache.down),
        "warnings": list(cache.warnings),
    }
