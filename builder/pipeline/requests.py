"""What a command asks of the pipeline: frozen requests, made once from the parsed arguments.

Nothing in the pipeline reads an ``argparse.Namespace``; the command layer builds these (see
:mod:`builder.commands.common`), and tests and other tools can build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.engine.report import ProgressKind


@dataclass(frozen=True, kw_only=True)
class StackRequest:
    """Which manifest and vendor, and where state lives."""

    vendor: str
    manifest: Path | None = None  # None: $INFINI_STACK_MANIFEST, ./stack.yaml, the mini stack
    home: Path | None = None
    store: Path | None = None
    mirrors: tuple[str, ...] = ()  # URL=DIR, as --mirror takes them
    bundle: Path | None = None  # sources from this bundle only (no network)
    worktrees: tuple[str, ...] = ()  # COMPONENT=DIR, as --worktree takes them


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """What to plan: the selected components (and their dependencies), tests, parallelism."""

    components: tuple[str, ...] = ()  # empty: the vendor's whole stack
    tests: bool = False
    # Each component's own pytest suite on its entry (build --test, release); changes no key.
    suites: bool = False
    jobs: int | None = None
    sanitize: str | None = None  # address,undefined, thread or none; None: stack.yaml's


@dataclass(frozen=True, kw_only=True)
class CacheRequest:
    """The remote cache of store entries (see :mod:`builder.pipeline.cache`)."""

    urls: tuple[str, ...] | None = None  # None: $INFINI_STACK_CACHE, else stack.yaml's cache
    push: bool = False  # upload each entry built here
    required: bool = False  # an unreachable cache fails the build instead of a warning
    trust: tuple[str, ...] = ()  # public keys (or files) trusted besides stack.yaml's
    sign_key: Path | None = None  # None: $INFINI_STACK_CACHE_SIGNING_KEY(_FILE)


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    stack: StackRequest
    plan: PlanRequest = field(default_factory=PlanRequest)
    cache: CacheRequest = field(default_factory=CacheRequest)
    launcher: str = "auto"  # auto, none, or a program
    progress: ProgressKind = "auto"
    keep_going: bool = False
    memo: bool = True  # leave a no-op memo for the next identical command line
    argv: tuple[str, ...] | None = None  # the command line, which identifies a memo


@dataclass(frozen=True, kw_only=True)
class WheelRequest:
    build: BuildRequest
    out: Path = Path("dist")
    verify: bool = False  # build everything again from fresh directories, compare the wheels
    repair: bool = False  # retag manylinux with auditwheel repair, audit again
    variant: bool = False  # also the PEP 825 variant wheel (stack.yaml wheel.variant says so too)
    max_size: int | None = None  # bytes; overrides stack.yaml's wheel.max_size
    no_rebuild: bool = False  # an entry that fails its install manifest stops the run (exit 5)


@dataclass(frozen=True, kw_only=True)
class ReleaseRequest:
    build: BuildRequest
    output: Path
    verify: bool = True
    reverify: bool = False  # build the second time even where an earlier release proved it
    repair: bool = False
    strict: bool = False  # the smoke test must load every file
    variant: bool = False  # also the PEP 825 variant wheel (stack.yaml wheel.variant says so too)
    max_size: int | None = None  # bytes; overrides stack.yaml's wheel.max_size
    index: Path | None = None  # the per-vendor package index tree the wheel is merged into
    check_jobs: int | None = None  # the runtime check's children at once (None: as many as fit)
    # The CPython interpreters (X.Y or paths) to make a wheel for, from one native build; empty:
    # stack.yaml's wheel.pythons, else the interpreter the tool runs under.
    pythons: tuple[str, ...] = ()
