"""Linked providers, as InfiniOps' scripts/resolve_linked_ops.py checks them: a Python
distribution installed at a version satisfying a specifier, exactly one shared library matched
by a glob inside it, and required C++ symbols defined in that library.

They are declared in a file (JSON or YAML) passed with ``--linked``::

    {"linked": {"flash-attn": {"distribution": "flash-attn", "version": ">=2.7",
                               "library_glob": "flash_attn_2_cuda*.so",
                               "required_symbols": ["flash::mha_fwd(at::Tensor&, ...)"],
                               "components": ["infiniops"]}}}
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from builder.core.errors import ManifestError
from builder.providers import search
from builder.providers.probe import (
    BOTH,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    judge,
    specifier,
    unusable,
)

PREFIX = "linked:"
KEYS = ("distribution", "version", "library_glob", "required_symbols", "components")


@dataclass(frozen=True, kw_only=True)
class LinkedSpec:
    name: str
    distribution: str
    library_glob: str
    version: str = ""  # PEP 440 specifier; "" = any
    required_symbols: tuple[str, ...] = ()
    components: tuple[str, ...] = ("infiniops",)

    @property
    def provider_name(self) -> str:
        return PREFIX + self.name


# -- declaring them --------------------------------------------------------------------------------


def load(path: Path) -> tuple[LinkedSpec, ...]:
    """Read a ``--linked`` file; every problem is reported, each naming its entry."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ManifestError([f"{path}: cannot read linked providers: {exc}"]) from exc
    entries = data.get("linked") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ManifestError([f"{path}: expected a mapping 'linked: {{name: {{...}}}}'"])
    problems: list[str] = []
    specs = [
        s
        for name, raw in entries.items()
        if (s := _spec(str(name), raw, f"{path}: linked.{name}", problems)) is not None
    ]
    if problems:
        raise ManifestError(problems)
    return tuple(specs)


def _spec(name: str, raw: Any, where: str, problems: list[str]) -> LinkedSpec | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping")
        return None
    for key in raw:
        if key not in KEYS:
            problems.append(f"{where}.{key}: unknown key (known: {', '.join(KEYS)})")
    strings = {k: raw.get(k) for k in ("distribution", "library_glob", "version")}
    for key in ("distribution", "library_glob"):
        if not isinstance(strings[key], str) or not strings[key]:
            problems.append(f"{where}.{key}: required, a non-empty string")
    version = raw.get("version", "")
    if not isinstance(version, str) or specifier(version) is None:
        problems.append(f"{where}.version: '{version}' is not a PEP 440 version specifier")
    glob = str(strings["library_glob"] or "")
    if glob.startswith("/") or ".." in PurePosixPath(glob).parts:
        problems.append(f"{where}.library_glob: must be relative to the distribution")
    symbols = raw.get("required_symbols", [])
    if not isinstance(symbols, list) or not all(isinstance(s, str) and s.strip() for s in symbols):
        problems.append(f"{where}.required_symbols: a list of demangled C++ signatures")
        symbols = []
    components = raw.get("components", ["infiniops"])
    if not isinstance(components, list) or not all(isinstance(c, str) for c in components):
        problems.append(f"{where}.components: a list of component names")
        components = ["infiniops"]
    if any(p.startswith(where) for p in problems):
        return None
    return LinkedSpec(
        name=name,
        distribution=str(strings["distribution"]),
        library_glob=glob,
        version=str(version),
        required_symbols=tuple(s.strip() for s in symbols),
        components=tuple(components),
    )


# -- probing them ----------------------------------------------------------------------------------


def provider(spec: LinkedSpec) -> Provider:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        for dist_info in search.distributions(ctx, (spec.distribution,)):
            yield Candidate(path=dist_info, origin="site-packages")

    def read(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
        return read_linked(spec, ctx, candidate)

    return Provider(
        name=spec.provider_name,
        what=f"linked library from {spec.distribution}",
        needed_for=BOTH,
        rules=(Rule(names=frozenset(spec.components)),),
        candidates=candidates,
        read=read,
        hint=lambda ctx: (
            f"{ctx.python.executable} -m pip install "
            f"'{spec.distribution}{spec.version}' (a build that exports the required symbols)"
        ),
    )


def read_linked(spec: LinkedSpec, ctx: ProbeContext, candidate: Candidate) -> Reading:
    version = search.metadata_version(candidate.path)
    base = Reading(version=version, source="dist-info METADATA")
    if judge(base, specifier(spec.version)) != "found":
        return base  # the version decides; no need to open the library
    matches = library_matches(candidate.path, spec.library_glob)
    if len(matches) != 1:
        listed = ", ".join(str(m) for m in matches) or "none"
        return unusable(
            f"library_glob '{spec.library_glob}' matched {len(matches)} files "
            f"(exactly one is needed): {listed}"
        )
    library = matches[0]
    from builder.providers.demangle import Unavailable  # only when needed
    from builder.providers.symbols import SymbolError, missing_symbols

    try:
        missing = missing_symbols(library, spec.required_symbols)
    except SymbolError as exc:
        return unusable(str(exc))
    except Unavailable as exc:
        unchecked = f"required symbol(s) not checked: {exc}"
        return Reading(
            version=version, source="dist-info METADATA", path=library, notes=(unchecked,)
        )
    if missing:
        return Reading(
            version=version,
            source="dist-info METADATA",
            path=library,
            satisfied=False,
            problem=f"{library.name} lacks required symbol(s): " + "; ".join(missing),
        )
    notes = (
        (f"{len(spec.required_symbols)} required symbol(s) present",)
        if spec.required_symbols
        else ()
    )
    return Reading(version=version, source="dist-info METADATA", path=library, notes=notes)


def library_matches(dist_info: Path, pattern: str) -> list[Path]:
    """Files of the distribution matching ``pattern`` part by part (RECORD, then a glob)."""
    root = dist_info.parent
    parts = PurePosixPath(pattern).parts
    found: set[Path] = set()
    for entry in search.record_files(dist_info):
        relative = PurePosixPath(entry.replace("\\", "/"))
        if len(relative.parts) == len(parts) and all(
            fnmatch.fnmatchcase(a, b) for a, b in zip(relative.parts, parts, strict=True)
        ):
            path = (root / relative).resolve()
            if path.is_file() and path.is_relative_to(root.resolve()):
                found.add(path)
    for path in root.glob(pattern):
        if path.is_file():
            found.add(path.resolve())
    return sorted(found)


def constraints(specs: tuple[LinkedSpec, ...]) -> Mapping[str, str]:
    return {s.provider_name: s.version for s in specs}
