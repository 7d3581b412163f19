"""The frozen data model of a stack: what the manifest and the recipes say, validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from builder.core.redact import redact
from builder.core.sanitize import Suppression
from builder.vendors.base import VendorSettings
from wheels.spec import WheelSpec


@dataclass(frozen=True, kw_only=True)
class GitSource:
    url: str
    rev: str  # a full 40-hex commit SHA

    @property
    def identity(self) -> str:
        return f"git:{self.rev}"


@dataclass(frozen=True, kw_only=True)
class PathSource:
    path: Path  # absolute

    @property
    def identity(self) -> str:  # the content hash is computed by builder.sources
        return f"path:{self.path}"


@dataclass(frozen=True, kw_only=True)
class WorktreeSource(PathSource):
    """A local git working tree given with ``--worktree COMPONENT=DIR``: built in place like a
    path source, keyed by its HEAD and a hash of its uncommitted changes."""

    head: str  # the commit checked out
    diff: str  # sha256 of the changes against HEAD (tracked and untracked); "" when clean

    @property
    def identity(self) -> str:
        return f"worktree:{self.head}+{self.diff or 'clean'}"

    @property
    def dirty(self) -> bool:
        return bool(self.diff)

    def describe(self) -> dict[str, str]:
        """What the run report says of it."""
        return {"path": str(self.path), "head": self.head, "diff": self.diff}


Source = GitSource | PathSource


@dataclass(frozen=True)
class Deselected:
    """A test left out of a component's suite (a path, or a pytest node id), and why."""

    test: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class SuiteBuild:
    """A build made for the suite only (``test.build``), beside the shipped one: the same
    configure with ``options`` added, ``target`` built, and its Python module put in a package
    named ``package`` on the suite's PYTHONPATH. Nothing of it reaches the store."""

    options: Mapping[str, str]
    target: str
    package: str


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A component's own pytest suite (``test.pytest``), run from its checkout against the
    store entry the wheel bundles; ``{vendor}`` in its arguments is the vendor's name."""

    args: tuple[str, ...]
    workers: int = 1  # pytest-xdist's -n (the suite always runs in xdist's workers)
    build: SuiteBuild | None = None
    select: tuple[str, ...] = ()  # paths or node ids run instead of the suite's own
    deselect: tuple[Deselected, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # {prefix}: the entry's prefix


@dataclass(frozen=True, kw_only=True)
class TestSpec:
    options: Mapping[str, str]
    command: tuple[str, ...]
    suite: Suite | None = None

    @property
    def in_build(self) -> bool:
        """Whether it builds (options) or runs (a command) beside the entry: a build of the
        component with the options in a directory of its own, never an entry."""
        return bool(self.options or self.command)


@dataclass(frozen=True)
class Patch:
    """A recipe patch: ``name`` as the recipe writes it, ``path`` the file it names."""

    name: str  # patches/NAME.patch, relative to components/<component>/
    path: Path


TARGET = "target"  # recipe ``python: true``
TOOL = "tool"  # recipe ``python: tool``


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """How to build one component: ``components/<name>.yaml``."""

    name: str
    file: Path
    description: str
    cmake_minimum: str
    depends: tuple[str, ...]
    options: Mapping[str, str]
    dependency_vars: Mapping[str, str]
    # How its build uses Python (``python:``, per vendor ``vendors.V.python``): TARGET builds for
    # the interpreter a wheel is for (extension modules, that interpreter's torch) and is keyed
    # by it; TOOL runs Python only as a build tool (code generators), with the tool's own
    # interpreter whichever the wheel's, so one build serves every interpreter; "" not at all.
    python: str
    vendors: Mapping[str, Mapping[str, str]]  # supported vendor -> its options
    outputs: tuple[str, ...]
    test: TestSpec | None
    # The submodule paths the build reads; None: every submodule, recursively. Upstream
    # repositories carry submodules a build never reads (InfiniOps' .ci, whose gitlink is not
    # published), and an unfetchable one must not stop a build, a fetch or a bundle.
    submodules: frozenset[str] | None = None
    project: Path | None = None  # a wrapper CMake project kept beside the recipe
    source_var: str | None = None  # the cache variable that tells ``project`` where the sources are
    # Dependencies of one vendor only, on top of ``depends`` (InfiniOps needs CUTLASS on NVIDIA).
    vendor_depends: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Applied in order to the per-build checkout, after its submodules: these first, then the
    # vendor's own (``vendors.<v>.patches``).
    patches: tuple[Patch, ...] = ()
    vendor_patches: Mapping[str, tuple[Patch, ...]] = field(default_factory=dict)
    vendor_tests: Mapping[str, TestSpec] = field(default_factory=dict)  # instead of ``test``
    # Vendors whose toolkit this recipe's build does not need (``vendors.<v>.toolkit: false``:
    # the mini stack's stand-in backends); preflight then does not ask for it.
    without_toolkit: frozenset[str] = frozenset()
    vendor_python: Mapping[str, str] = field(default_factory=dict)  # instead of ``python``

    def python_for(self, vendor: str) -> str:
        """TARGET, TOOL or "" (no Python): the vendor's own ``python:``, else the recipe's."""
        return self.vendor_python.get(vendor, self.python)

    def depends_for(self, vendor: str) -> tuple[str, ...]:
        return (*self.depends, *self.vendor_depends.get(vendor, ()))

    def test_for(self, vendor: str) -> TestSpec | None:
        """The vendor's own test (``vendors.<v>.test``), else the recipe's."""
        return self.vendor_tests.get(vendor, self.test)

    def patches_for(self, vendor: str) -> tuple[Patch, ...]:
        return (*self.patches, *self.vendor_patches.get(vendor, ()))

    def every_depends(self) -> tuple[str, ...]:
        """What it depends on for some vendor: one build order serves them all."""
        extra = (d for deps in self.vendor_depends.values() for d in deps)
        return tuple(dict.fromkeys((*self.depends, *extra)))

    def dependency_vars_for(self, vendor: str) -> dict[str, str]:
        """The dependency variables whose component this vendor's build depends on."""
        deps = self.depends_for(vendor)
        return {var: dep for var, dep in self.dependency_vars.items() if dep in deps}


@dataclass(frozen=True, kw_only=True)
class VendorOverride:
    source: Source | None
    options: Mapping[str, str]
    reason: str | None = None  # why its pin departs from the contract (builder.manifest.contract)


@dataclass(frozen=True, kw_only=True)
class Component:
    """A component as pinned in stack.yaml, with its recipe."""

    name: str
    source: Source
    options: Mapping[str, str]
    overrides: Mapping[str, VendorOverride]
    recipe: Recipe
    only: frozenset[str] | None = None  # the vendors whose stack has it; None: every vendor
    reason: str | None = None  # why its pin departs from the contract (builder.manifest.contract)
    # ``source: NAME``: built from component NAME's checkout (its pins, per vendor too), which
    # it takes instead of a pin of its own (InfiniLM's runtime, beside its extension modules).
    borrows: str | None = None

    def in_stack(self, vendor: str) -> bool:
        return self.only is None or vendor in self.only

    def source_for(self, vendor: str) -> Source:
        override = self.overrides.get(vendor)
        return override.source if override and override.source else self.source

    def reason_for(self, vendor: str) -> str | None:
        """Why the pin ``vendor`` builds departs from the contract, where the manifest says."""
        override = self.overrides.get(vendor)
        if override and override.source:
            return override.reason
        return self.reason

    def options_for(self, vendor: str) -> dict[str, str]:
        """Recipe options, then the recipe's vendor options, then stack.yaml's, then overrides."""
        merged = dict(self.recipe.options)
        merged.update(self.recipe.vendors.get(vendor, {}))
        merged.update(self.options)
        override = self.overrides.get(vendor)
        if override:
            merged.update(override.options)
        return merged


@dataclass(frozen=True, kw_only=True)
class CiSettings:
    runs_on: tuple[str, ...] = ()
    image: str | None = None


@dataclass(frozen=True, kw_only=True)
class VendorConfig:
    name: str
    settings: VendorSettings
    providers: Mapping[str, str]  # provider name -> PEP 440 specifier (validated)
    linked: tuple[Path, ...] = ()  # files declaring linked providers (builder.providers.linked)
    ci: CiSettings = field(default_factory=CiSettings)
    check: Path | None = None  # the runtime check run against the installed wheel
    sanitize: str | None = None  # a sanitizer profile every build of it has (--sanitize wins)


@dataclass(frozen=True, kw_only=True)
class CacheSettings:
    """stack.yaml's ``cache:``: the remote caches tried in order, and the keys trusted."""

    urls: tuple[str, ...] = ()
    trust: tuple[str, ...] = ()  # ed25519:<base64> lines, or absolute paths of key files


@dataclass(frozen=True, kw_only=True)
class Contract:
    """stack.yaml's ``contract:``: the superproject whose gitlinks the pins follow."""

    name: str  # e.g. infinicore
    url: str
    rev: str
    pins: Mapping[str, str]  # component -> the superproject's gitlink for it


@dataclass(frozen=True, kw_only=True)
class Stack:
    file: Path  # the manifest
    label: str  # the manifest as shown in messages
    build_type: str
    vendors: Mapping[str, VendorConfig]
    components: Mapping[str, Component]
    order: tuple[str, ...]  # dependency order (dependencies first)
    wheel: WheelSpec | None
    mirrors: Mapping[str, str]  # repository URL -> local directory or URL
    # "shared": the stack's libraries pass C++ objects to each other (and to torch), so every
    # one must use the shared C++ runtime (libstdc++.so.6); "any": no such constraint.
    cxx_runtime: str = "any"
    cache: CacheSettings = field(default_factory=CacheSettings)
    contract: Contract | None = None  # stack.yaml's ``contract:``
    # Upstream sanitizer findings a sanitized run goes on past (builder.manifest.suppressions).
    suppressions: tuple[Suppression, ...] = ()

    @property
    def root(self) -> Path:
        return self.file.parent

    def names_for(self, vendor: str) -> tuple[str, ...]:
        """The components of ``vendor``'s stack, in dependency order."""
        return tuple(n for n in self.order if self.components[n].in_stack(vendor))

    def closure(self, names: tuple[str, ...], vendor: str) -> tuple[str, ...]:
        """``names`` and everything they depend on for ``vendor``, in dependency order."""
        wanted: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in wanted:
                wanted.add(name)
                todo.extend(self.components[name].recipe.depends_for(vendor))
        return tuple(n for n in self.order if n in wanted)

    def selected(self, vendor: str, select: tuple[str, ...] = ()) -> tuple[str, ...]:
        """What a command for ``vendor`` works on: ``select`` and its dependencies, else the
        vendor's whole stack."""
        return self.closure(select, vendor) if select else self.names_for(vendor)


def source_label(source: Source) -> str:
    """A source as people read it: URL @ rev, a working tree and its state, or a path."""
    if isinstance(source, GitSource):
        return f"{redact(source.url)} @ {source.rev}"
    if isinstance(source, WorktreeSource):
        changes = f"changes sha256 {source.diff[:12]}" if source.dirty else "clean"
        return f"working tree {source.path} (HEAD {source.head[:12]}, {changes})"
    return str(source.path)
