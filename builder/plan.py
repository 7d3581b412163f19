"""Planning: manifest + vendor + host facts -> ordered steps with exact commands and cache keys.

Pure: nothing here touches the disk or runs a program. ``infini-stack plan`` prints a Plan;
``infini-stack build`` executes one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from builder import __version__
from builder.core.host import HostFacts
from builder.core.layout import Layout
from builder.core.sanitize import Profile, cmake_defines
from builder.manifest.model import (
    TOOL,
    Component,
    Patch,
    PathSource,
    Source,
    Stack,
    source_label,
)
from builder.plan_paths import all_path_maps
from builder.plan_suites import (
    PlannedSuite,
    PlannedTest,
    configure_argv,
    in_build_test,
    plan_suite,
    plan_test,
    suite_json,
    test_json,
)
from builder.vendors import get as get_vendor

StepKind = Literal["configure", "build", "install"]
# Environment variables CMake reads on a first configure: they change what gets compiled.
COMPILER_ENV = (
    "CC",
    "CXX",
    "CUDACXX",
    "CUDAHOSTCXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "CUDAFLAGS",
    "LDFLAGS",
)


@dataclass(frozen=True, kw_only=True)
class Step:
    kind: StepKind
    argv: tuple[str, ...]
    cwd: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What planning needs from the disk, gathered beforehand (see builder.sources.gather)."""

    source_ids: Mapping[str, str]  # component -> "git:<sha>" or "path:<content hash>"
    recipe_digests: Mapping[str, str]  # component -> hash of its recipe (and project files)
    patch_digests: Mapping[Path, str] = field(default_factory=dict)  # patch file -> sha256


@dataclass(frozen=True)
class PlannedPatch:
    """A recipe patch as planned: its content hash is part of the component's key."""

    name: str
    path: Path
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ComponentPlan:
    name: str
    vendor: str
    key: str
    source: Source
    source_id: str
    source_dir: Path  # the tree configure reads (a per-build checkout, or the path source)
    cmake_source: Path  # -S: the source tree, or the recipe's wrapper project
    build_dir: Path
    prefix: Path  # the store entry's install prefix
    depends: tuple[str, ...]
    defines: Mapping[str, str]
    env: Mapping[str, str]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    incremental: bool  # a path source keeps its build directory across keys
    submodules: frozenset[str] | None = None  # the submodule paths to check out; None: all
    patches: tuple[PlannedPatch, ...] = ()  # applied in order to the checkout
    sanitize: Profile | None = None  # the sanitizer profile it compiles and links with
    test: PlannedTest | None = None  # its in-build test, built and run beside the entry
    suite: PlannedSuite | None = None  # its own pytest suite, run on the entry after its build
    key_inputs: Mapping[str, Any] = field(compare=False)

    @property
    def short_key(self) -> str:
        return self.key[:12]

    @property
    def tested(self) -> bool:
        """Whether tests run once its entry is in the store (``build --test``, ``release``)."""
        return self.test is not None or self.suite is not None


@dataclass(frozen=True, kw_only=True)
class Plan:
    stack: Stack
    vendor: str
    host: HostFacts
    components: tuple[ComponentPlan, ...]
    jobs: int
    sanitize: Profile | None = None

    def get(self, name: str) -> ComponentPlan:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(name)


def make_plan(
    stack: Stack,
    vendor: str,
    host: HostFacts,
    inputs: Inputs,
    layout: Layout,
    *,
    select: tuple[str, ...] = (),
    tests: bool = False,
    suites: bool = False,
    jobs: int | None = None,
    sanitize: Profile | None = None,
) -> Plan:
    names = stack.selected(vendor, select)
    jobs = jobs or host.cpu_count
    planned: dict[str, ComponentPlan] = {}
    for name in names:
        component = stack.components[name]
        # python: tool builds with the tool's own interpreter, whichever the target's.
        own = host.for_tool() if component.recipe.python_for(vendor) == TOOL else host
        planned[name] = plan_component(
            stack, component, vendor, own, inputs, layout, planned, jobs, sanitize
        )
        if tests:
            planned[name] = with_test(stack, planned[name], jobs)
        if suites:
            planned[name] = with_suite(stack, planned[name], own, planned, jobs)
    return Plan(
        stack=stack,
        vendor=vendor,
        host=host,
        components=tuple(planned.values()),
        jobs=jobs,
        sanitize=sanitize,
    )


def plan_component(
    stack: Stack,
    component: Component,
    vendor: str,
    host: HostFacts,
    inputs: Inputs,
    layout: Layout,
    done: Mapping[str, ComponentPlan],
    jobs: int,
    sanitize: Profile | None = None,
) -> ComponentPlan:
    recipe = component.recipe
    plugin = get_vendor(vendor)
    options = component.options_for(vendor)
    own = _own_host(host, component.name)
    vendor_defines = plugin.cmake_defines(own, stack.vendors[vendor].settings)
    sanitizing = cmake_defines(sanitize, cuda="CMAKE_CUDA_FLAGS_INIT" in vendor_defines)
    env = plugin.environment(host)
    patches = _patches(recipe.patches_for(vendor), inputs)
    key_inputs = _key_inputs(
        stack, component, vendor, own, inputs, options, vendor_defines, env, done, patches
    )
    key_inputs.update(_sanitize_key(sanitizing))
    key = hash_inputs(key_inputs)
    source = component.source_for(vendor)
    source_dir, build_dir = _directories(component, vendor, host, source, key, layout, sanitize)
    prefix = layout.entry_prefix(key)
    defines = _defines(
        stack, component, vendor, host, options, vendor_defines, prefix, done, source_dir
    )
    defines.update(all_path_maps(component.name, source_dir, build_dir, layout.store_root, defines))
    defines.update({**sanitizing, **options})  # a recipe's own flags win
    cmake_source = recipe.project if recipe.project else source_dir
    steps = _steps(cmake_source, build_dir, layout.staging_prefix(key), defines, jobs)
    return ComponentPlan(
        name=component.name,
        vendor=vendor,
        key=key,
        source=source,
        source_id=inputs.source_ids[component.name],
        source_dir=source_dir,
        cmake_source=cmake_source,
        build_dir=build_dir,
        prefix=prefix,
        depends=recipe.depends_for(vendor),
        defines=defines,
        env=env,
        steps=steps,
        outputs=recipe.outputs,
        incremental=isinstance(source, PathSource),
        submodules=recipe.submodules,
        patches=patches,
        sanitize=sanitize,
        key_inputs=key_inputs,
    )


def with_test(stack: Stack, planned: ComponentPlan, jobs: int) -> ComponentPlan:
    """``planned`` with its recipe's in-build test for its vendor, built beside the entry with
    the test's options: it changes no key."""
    spec = in_build_test(stack.components[planned.name].recipe.test_for(planned.vendor))
    if spec is None:
        return planned
    test = plan_test(
        spec,
        cmake_source=planned.cmake_source,
        build_dir=planned.build_dir,
        defines=planned.defines,
        jobs=jobs,
    )
    return replace(planned, test=test)


def with_suite(
    stack: Stack,
    planned: ComponentPlan,
    host: HostFacts,
    done: Mapping[str, ComponentPlan],
    jobs: int,
) -> ComponentPlan:
    """``planned`` with its recipe's pytest suite for its vendor, when it has one."""
    component = stack.components[planned.name]
    test = component.recipe.test_for(planned.vendor)
    if test is None or test.suite is None:
        return planned
    deps = stack.closure(component.recipe.depends_for(planned.vendor), planned.vendor)
    suite = plan_suite(
        test.suite,
        vendor=planned.vendor,
        python=host.python,
        source_dir=planned.source_dir,
        cmake_source=planned.cmake_source,
        build_dir=planned.build_dir,
        prefix=planned.prefix,
        dependency_prefixes=tuple(done[d].prefix for d in deps),
        defines=planned.defines,
        jobs=jobs,
        toolkit=host.toolkit.root if host.toolkit and host.toolkit.found else None,
    )
    return replace(planned, suite=suite)


def _own_host(host: HostFacts, name: str) -> HostFacts:
    """The host as component ``name`` sees it: only the provider fingerprints and hints it uses
    go into its defines and its key."""
    return replace(
        host,
        hints=host.component_hints.get(name, host.hints),
        providers=host.component_providers.get(name, host.providers),
    )


def _key_inputs(
    stack: Stack,
    component: Component,
    vendor: str,
    own: HostFacts,
    inputs: Inputs,
    options: Mapping[str, str],
    vendor_defines: Mapping[str, str],
    env: Mapping[str, str],
    done: Mapping[str, ComponentPlan],
    patches: tuple[PlannedPatch, ...],
) -> dict[str, Any]:
    """Everything that can change what the component's build produces (``own``: the host as
    this component sees it, with its own provider fingerprints)."""
    recipe = component.recipe
    key_inputs: dict[str, Any] = {
        "tool": __version__,
        "component": component.name,
        "vendor": vendor,
        "source": inputs.source_ids[component.name],
        "recipe": inputs.recipe_digests[component.name],
        "submodules": sorted(recipe.submodules) if recipe.submodules is not None else "all",
        "build_type": stack.build_type,
        "options": dict(sorted(options.items())),
        "vendor_defines": dict(sorted(vendor_defines.items())),
        "env": dict(sorted(env.items())),
        "dependencies": {d: done[d].key for d in recipe.depends_for(vendor)},
        "dependency_vars": dict(sorted(recipe.dependency_vars_for(vendor).items())),
        "compiler": [own.cxx, own.cxx_version],
        "compiler_env": {k: own.env[k] for k in COMPILER_ENV if own.env.get(k)},
        "toolkit": _toolkit_identity(own),
        "providers": dict(sorted(own.providers.items())),
        # Tests build beside the entry (PlannedTest): always False, kept so keys stay as they were.
        "tests": False,
    }
    if recipe.python_for(vendor):
        key_inputs["python"] = [own.python, own.soabi, own.pybind11_version]
    if patches:  # absent when there are none, so that unpatched keys stay as they were
        key_inputs["patches"] = [[p.name, p.sha256] for p in patches]
    key_inputs["path_maps"] = "/infini-stack"  # what path_maps maps this machine's paths to
    return key_inputs


def _sanitize_key(sanitizing: Mapping[str, str]) -> dict[str, Any]:
    """The sanitizer flags in a key: absent from a plain build's, which stays as it was."""
    return {"sanitize": dict(sorted(sanitizing.items()))} if sanitizing else {}


def _patches(patches: tuple[Patch, ...], inputs: Inputs) -> tuple[PlannedPatch, ...]:
    return tuple(PlannedPatch(p.name, p.path, inputs.patch_digests[p.path]) for p in patches)


def _directories(
    component: Component,
    vendor: str,
    host: HostFacts,
    source: Source,
    key: str,
    layout: Layout,
    sanitize: Profile | None,
) -> tuple[Path, Path]:
    """The source tree and build directory: a path source is built in place, incrementally, in
    a directory per vendor (and sanitizer, and interpreter tag of one of several interpreters);
    a git source gets a checkout and a build directory of its own per key."""
    name = component.name
    if isinstance(source, PathSource):
        lane = host.python_tag if component.recipe.python_for(vendor) else ""
        where = f"{vendor}-{sanitize.label}" if sanitize else vendor
        return source.path, layout.incremental_build_dir(name, where, source.path, lane)
    return layout.source_tree(name, key), layout.build_dir(name, key)


def _toolkit_identity(host: HostFacts) -> list[str] | None:
    tk = host.toolkit
    return [str(tk.root), tk.version or ""] if tk else None


def hash_inputs(data: Mapping[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _defines(
    stack: Stack,
    component: Component,
    vendor: str,
    host: HostFacts,
    options: Mapping[str, str],
    vendor_defines: Mapping[str, str],
    prefix: Path,
    done: Mapping[str, ComponentPlan],
    source_dir: Path,
) -> dict[str, str]:
    recipe = component.recipe
    defines: dict[str, str] = {
        "CMAKE_BUILD_TYPE": stack.build_type,
        "CMAKE_INSTALL_PREFIX": str(prefix),
        # GNUInstallDirs picks lib64 on some distributions; recipes name lib/.
        "CMAKE_INSTALL_LIBDIR": "lib",
    }
    dep_prefixes = [str(done[d].prefix) for d in stack.closure(recipe.depends_for(vendor), vendor)]
    if dep_prefixes:
        defines["CMAKE_PREFIX_PATH"] = ";".join(dep_prefixes)
    for var, dep in recipe.dependency_vars_for(vendor).items():
        defines[var] = str(done[dep].prefix)
    if recipe.project is not None and recipe.source_var:
        defines[recipe.source_var] = str(source_dir)
    if recipe.python_for(vendor):
        defines["Python_EXECUTABLE"] = host.python
        if host.pybind11_dir:
            defines["pybind11_DIR"] = host.pybind11_dir
    defines.update(vendor_defines)
    defines.update(options)
    return defines


def _steps(
    cmake_source: Path,
    build_dir: Path,
    staging: Path,
    defines: Mapping[str, str],
    jobs: int,
) -> tuple[Step, ...]:
    configure = configure_argv(cmake_source, build_dir, defines)
    steps = [
        Step(kind="configure", argv=configure),
        Step(kind="build", argv=("cmake", "--build", str(build_dir), "--parallel", str(jobs))),
    ]
    # Installed aside, then renamed into the store; the configured prefix stays the final one so
    # that paths baked in at configure time name where the files will live.
    install = ("cmake", "--install", str(build_dir), "--prefix", str(staging))
    steps.append(Step(kind="install", argv=install))
    return tuple(steps)


def launcher_defines(launcher: str) -> dict[str, str]:
    """Cache variables that run every C, C++ and CUDA compile through ``launcher``."""
    return {f"CMAKE_{lang}_COMPILER_LAUNCHER": launcher for lang in ("C", "CXX", "CUDA")}


def to_json(plan: Plan) -> dict[str, Any]:
    return {
        "manifest": str(plan.stack.file),
        "vendor": plan.vendor,
        "jobs": plan.jobs,
        "sanitize": plan.sanitize.spec if plan.sanitize else None,
        "components": [
            {
                "name": c.name,
                "key": c.key,
                "source": source_label(c.source),
                "source_id": c.source_id,
                "source_dir": str(c.source_dir),
                "build_dir": str(c.build_dir),
                "prefix": str(c.prefix),
                "depends": list(c.depends),
                "defines": dict(c.defines),
                "env": dict(c.env),
                "steps": [
                    {"kind": s.kind, "argv": list(s.argv), "cwd": str(s.cwd) if s.cwd else None}
                    for s in c.steps
                ],
                "outputs": list(c.outputs),
                "patches": [
                    {"name": p.name, "path": str(p.path), "sha256": p.sha256} for p in c.patches
                ],
                "test": test_json(c.test),
                "suite": suite_json(c.suite),
            }
            for c in plan.components
        ],
    }
