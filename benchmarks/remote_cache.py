"""The remote cache on the mini stack: a cold build that pushes, then a cold build in a fresh home
with a warm cache, against the floor of fetching and unpacking the same entries by hand.

    python benchmarks/remote_cache.py [--rounds 3]
    python benchmarks/remote_cache.py --manifest stack.yaml --vendor cpu -- BUILD OPTIONS

The mini stack by default; ``--manifest`` (with ``--vendor``, and build options after ``--``,
such as ``-c infinirt --mirror URL=DIR``) times another stack the same way, e.g. the real cpu
stack.

It starts its own docker-registry on loopback (Debian's ``docker-registry``), or uses a
``file://`` cache when that is absent (and says so). Each round, in one run of this script:

- ``cold + push``: ``build --cache URL --push`` in a fresh home, into a fresh repository;
- ``warm cache``: ``build --cache URL`` in another fresh home (every component pulled);
- ``all hits``: the same build in a third fresh home whose store is a copy of the second's
  (what any first build in a new home costs with everything in the store: start-up, manifest,
  preflight probes, plan);
- ``pull stage``: the part of ``warm cache`` spent looking up, fetching, verifying, unpacking,
  relocating and committing the entries (from its run report);
- ``fetch + unpack``: the floor, what pulling an entry by hand takes (as ``oras pull`` does it):
  the manifest its key's tag names, its config and its layer fetched over HTTP (or read from the
  directory), the layer unpacked with zstd and tarfile, in-process, nothing checked;
- ``layer only``: a lower floor that already knows each layer's digest (from the pulled store
  records): only the layer fetched and unpacked.

It prints medians over the rounds, the bytes pushed and pulled, and the ratios: what the cache
adds to a build (warm cache - all hits) over the floor (goal: <= 1.5), and the warm-cache build
over the cold compile (goal: a small fraction).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.registry import Registry, registry_binary  # noqa: E402

MINI = ROOT / "examples" / "mini-stack" / "stack.yaml"
TIMES = (
    "cold + push",
    "compile",
    "warm cache",
    "pull stage",
    "all hits",
    "fetch + unpack",
    "layer only",
)


def build(target: argparse.Namespace, home: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "builder", "build", "--manifest", str(target.manifest)]
    # No compiler launcher: a ccache warm from earlier builds would make the cold build not cold.
    argv += ["--vendor", target.vendor, "--progress", "quiet", "--no-memo", "--launcher", "none"]
    argv += [*target.build_options, *extra]
    env = {**os.environ, "INFINI_STACK_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("INFINI_STACK_STORE", None)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    return seconds, json.loads((home / "runs" / "last.json").read_text())


def layers(report: dict[str, Any]) -> list[str]:
    """The layer digests of the entries a report pulled (from their store records)."""
    store = Path(report["store"])
    out = []
    for c in report["components"]:
        record = json.loads((store / c["key"][:32] / "record.json").read_text())
        out.append(record["origin"]["layer"])
    return out


def _get(url: str, what: str) -> bytes:
    """``what`` (``blobs/<digest>`` or ``manifests/<tag>``) of the cache at ``url``."""
    if url.startswith("oci://"):
        host, _, repo = url.removeprefix("oci://").partition("/")
        request = urllib.request.Request(f"http://{host}/v2/{repo}/{what}")
        request.add_header("Accept", "application/vnd.oci.image.manifest.v1+json")
        with urllib.request.urlopen(request) as r:
            return bytes(r.read())
    kind, _, name = what.partition("/")
    root = Path(url.removeprefix("file://"))
    if kind == "manifests":
        return (root / "tags" / name).read_bytes()
    return (root / "blobs/sha256" / name.removeprefix("sha256:")).read_bytes()


def _unpack(data: bytes, dest: Path) -> None:
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
    with tarfile.open(fileobj=raw, mode="r|") as tar:
        tar.extractall(dest, filter="data")


def fetch_and_unpack(url: str, keys: list[str], dest: Path) -> float:
    """The floor: each entry's manifest (by its key's tag), config and layer fetched and the
    layer unpacked, nothing verified or relocated."""
    start = time.perf_counter()
    for i, key in enumerate(keys):
        manifest = json.loads(_get(url, f"manifests/{key}"))
        _get(url, f"blobs/{manifest['config']['digest']}")
        _unpack(_get(url, f"blobs/{manifest['layers'][0]['digest']}"), dest / str(i))
    return time.perf_counter() - start


def layer_only(url: str, digests: list[str], dest: Path) -> float:
    """The lower floor: each layer, its digest known, fetched and unpacked."""
    start = time.perf_counter()
    for i, digest in enumerate(digests):
        _unpack(_get(url, f"blobs/{digest}"), dest / str(i))
    return time.perf_counter() - start


def one_round(target: argparse.Namespace, base: Path, url: str) -> dict[str, float]:
    cold, pushed = build(target, base / "home-cold", "--cache", url, "--push")
    warm, pulled = build(target, base / "home-warm", "--cache", url)
    assert pulled["totals"]["pulled"] == len(pulled["components"]), pulled["totals"]
    shutil.copytree(base / "home-warm" / "store", base / "home-hits" / "store", symlinks=True)
    hits, _ = build(target, base / "home-hits", "--cache", url)
    floor = fetch_and_unpack(url, [c["key"] for c in pulled["components"]], base / "floor")
    lower = layer_only(url, layers(pulled), base / "layer-only")
    return {
        "cold + push": cold,
        "compile": sum(c["seconds"] for c in pushed["components"]),
        "warm cache": warm,
        "pull stage": pulled["cache"]["pull_seconds"],
        "all hits": hits,
        "fetch + unpack": floor,
        "layer only": lower,
        "bytes pushed": sum(c.get("cache", {}).get("bytes", 0) for c in pushed["components"]),
        "bytes pulled": sum(c.get("cache", {}).get("bytes", 0) for c in pulled["components"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--manifest", type=Path, default=MINI, help="default: the mini stack")
    parser.add_argument("--vendor", default="cpu")
    parser.add_argument("build_options", nargs="*", help="after --: more build options")
    args = parser.parse_args()
    args.manifest = args.manifest.resolve()
    with tempfile.TemporaryDirectory(prefix="remote-cache-bench-") as tmp:
        work = Path(tmp)
        registry = None
        if registry_binary() is not None:
            registry = Registry(work / "registry").start()
            print(f"cache: docker-registry on {registry.host} (loopback HTTP)")
        else:
            print("cache: a file:// directory (no docker-registry here to start)")
        try:
            rounds = []
            for i in range(args.rounds):
                url = registry.url(f"bench/round{i}") if registry else f"file://{work}/cache{i}"
                if registry is None:
                    (work / f"cache{i}").mkdir()
                rounds.append(one_round(args, work / f"round{i}", url))
        finally:
            if registry is not None:
                registry.stop()
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    name = "mini stack" if args.manifest == MINI else str(args.manifest)
    print(f"{name}, {args.vendor}, {args.rounds} rounds, medians:")
    for name in TIMES:
        print(f"  {name:<16} {med[name]:8.3f} s")
    print(f"  bytes pushed     {med['bytes pushed']:8.0f}   bytes pulled {med['bytes pulled']:.0f}")
    added = med["warm cache"] - med["all hits"]
    print(f"what the cache adds (warm cache - all hits): {added:.3f} s")
    print(f"  / fetch + unpack: {added / med['fetch + unpack']:.2f}  (goal <= 1.5)")
    print(f"pull stage / fetch + unpack: {med['pull stage'] / med['fetch + unpack']:.2f}")
    print(f"pull stage / layer only: {med['pull stage'] / med['layer only']:.2f}")
    print(f"warm cache / cold + push: {med['warm cache'] / med['cold + push']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
