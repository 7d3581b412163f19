"""Read one component recipe (``components/<name>.yaml``): how it is built, per vendor."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from builder import vendors as vendor_registry
from builder.manifest.model import (
    TARGET,
    TOOL,
    Deselected,
    Patch,
    Recipe,
    Suite,
    SuiteBuild,
    TestSpec,
)
from builder.manifest.schema import Doc, Key, Reader, dotted, load_doc, unknown_message

CMAKE_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RECIPE_KEYS = (
    "description",
    "cmake_minimum",
    "depends",
    "options",
    "dependency_vars",
    "python",
    "vendors",
    "outputs",
    "test",
    "project",
    "source_var",
    "submodules",
    "patches",
)
RECIPE_VENDOR_KEYS = ("options", "depends", "patches", "test", "toolkit", "python")
TEST_KEYS = ("options", "command", "pytest", "workers", "build", "select", "deselect", "env")
SUITE_BUILD_KEYS = ("options", "target", "package")
# What runs a pytest suite on a built entry and changes nothing built: left out of the key.
SUITE_ONLY_KEYS = frozenset(("pytest", "workers", "build", "select", "deselect", "env"))


def load_recipe(
    name: str, path: Path, parent: Reader, parent_key: Key
) -> tuple[Recipe, Doc] | None:
    if not path.is_file():
        parent.error(parent_key, f"component '{name}' has no recipe: {path} does not exist")
        return None
    doc = load_doc(path, parent.problems)
    if doc is None:
        return None
    r = Reader(doc, parent.problems)
    if not isinstance(doc.data, dict):
        r.error((), "a recipe must be a mapping")
        return None
    r.check_keys((), RECIPE_KEYS)
    patch_dir = path.parent / path.stem  # components/<name>/ beside components/<name>.yaml
    vendors = _vendors(r, patch_dir)
    project, source_var = _project(r, path)
    recipe = Recipe(
        name=name,
        file=path.resolve(),
        description=r.string(("description",), default="") or "",
        cmake_minimum=_cmake_minimum(r),
        depends=r.strings(("depends",)),
        options=_options(r),
        dependency_vars=_dependency_vars(r),
        python=_python(r, ("python",)),
        vendors=vendors.options,
        outputs=r.strings(("outputs",)),
        test=_read_test(r),
        project=project,
        source_var=source_var,
        submodules=_submodules(r),
        vendor_depends=vendors.depends,
        patches=_patches(r, ("patches",), patch_dir),
        vendor_patches=vendors.patches,
        vendor_tests=vendors.tests,
        without_toolkit=frozenset(vendors.without_toolkit),
        vendor_python=vendors.python,
    )
    return recipe, doc


@dataclass
class _Vendors:
    options: dict[str, dict[str, str]] = field(default_factory=dict)
    depends: dict[str, tuple[str, ...]] = field(default_factory=dict)
    patches: dict[str, tuple[Patch, ...]] = field(default_factory=dict)
    tests: dict[str, TestSpec] = field(default_factory=dict)
    without_toolkit: set[str] = field(default_factory=set)
    python: dict[str, str] = field(default_factory=dict)


def _vendors(r: Reader, patch_dir: Path) -> _Vendors:
    """``vendors:``: the vendors the recipe supports, each with its options, extra
    dependencies and patches."""
    out = _Vendors()
    for raw in r.mapping(("vendors",), required=True):
        if not vendor_registry.is_known(raw):
            known = list(vendor_registry.REGISTRY)
            r.error(("vendors", raw), unknown_message("vendor", raw, known), on_key=True)
            continue
        r.check_keys(("vendors", raw), RECIPE_VENDOR_KEYS)
        vendor = vendor_registry.canonical_name(raw)
        out.options[vendor] = r.cmake_options(("vendors", raw, "options"))
        if extra := r.strings(("vendors", raw, "depends")):
            out.depends[vendor] = extra
        if own := _patches(r, ("vendors", raw, "patches"), patch_dir):
            out.patches[vendor] = own
        if test := _read_test(r, ("vendors", raw, "test")):
            out.tests[vendor] = test
        if r.has(("vendors", raw, "toolkit")) and not r.boolean(("vendors", raw, "toolkit")):
            out.without_toolkit.add(vendor)
        if r.has(("vendors", raw, "python")):
            out.python[vendor] = _python(r, ("vendors", raw, "python"))
    return out


def _python(r: Reader, key: Key) -> str:
    """``python: true`` (TARGET), ``tool`` (TOOL) or ``false`` (absent: ""), as a recipe says."""
    value = r.get(key)
    if value is None or value is False:
        return ""
    if value is True:
        return TARGET
    if value == TOOL:
        return TOOL
    r.error(
        key,
        f"'{dotted(key)}' must be true (built for the wheel's interpreter), tool (it runs Python "
        f"as a build tool only) or false, not {value!r}",
    )
    return ""


def _cmake_minimum(r: Reader) -> str:
    minimum = r.string(("cmake_minimum",), default="3.18") or "3.18"
    try:
        Version(minimum)
    except InvalidVersion:
        r.error(("cmake_minimum",), f"'{minimum}' is not a version")
    return minimum


def _options(r: Reader) -> dict[str, str]:
    options = r.cmake_options(("options",))
    for var in options:
        if not CMAKE_VAR_RE.match(var):
            r.error(("options", var), f"'{var}' is not a CMake variable name", on_key=True)
    return options


def _project(r: Reader, path: Path) -> tuple[Path | None, str | None]:
    """A wrapper CMake project beside the recipe, and the variable that names the sources."""
    project_raw = r.string(("project",))
    project = (path.parent / project_raw).resolve() if project_raw else None
    if project is not None and not (project / "CMakeLists.txt").is_file():
        r.error(("project",), f"project '{project_raw}' has no CMakeLists.txt")
    source_var = r.string(("source_var",))
    if project is not None and not source_var:
        r.error(("project",), "a recipe with 'project' must name its 'source_var'")
    return project, source_var


def _patches(r: Reader, key: Key, base: Path) -> tuple[Patch, ...]:
    """Patch files named relative to ``base`` (components/<name>/); each must exist."""
    out: list[Patch] = []
    for i, name in enumerate(r.strings(key)):
        path = (base / name).resolve()
        if not path.is_file():
            r.error((*key, i), f"patch '{name}' does not exist (looked for {path})")
            continue
        out.append(Patch(name=name, path=path))
    return tuple(out)


def _submodules(r: Reader) -> frozenset[str] | None:
    """``submodules: all`` (the default), ``none``, or a list of paths."""
    value = r.get(("submodules",))
    if value is None or value == "all":
        return None
    if value == "none":
        return frozenset()
    if isinstance(value, str):
        r.error(("submodules",), f"'submodules' must be all, none or a list, not '{value}'")
        return None
    return frozenset(p.strip("/") for p in r.strings(("submodules",)))


def _dependency_vars(r: Reader) -> dict[str, str]:
    """Cache variables naming a dependency's install prefix; for a dependency of some vendors
    only (``vendors.V.depends``), passed to those vendors' builds only."""
    out: dict[str, str] = {}
    depends = set(r.strings(("depends",)))
    for raw in r.mapping(("vendors",)):
        depends.update(r.strings(("vendors", raw, "depends")))
    for var in r.mapping(("dependency_vars",)):
        dep = r.string(("dependency_vars", var), required=True) or ""
        if dep not in depends:
            r.error(("dependency_vars", var), f"'{dep}' is not among this recipe's depends")
        out[var] = dep
    return out


def _read_test(r: Reader, key: Key = ("test",)) -> TestSpec | None:
    if not r.has(key):
        return None
    r.mapping(key)
    r.check_keys(key, TEST_KEYS)
    command = r.strings((*key, "command"))
    suite = _read_suite(r, key)
    if not command and suite is None:
        r.error(key, "a test needs a 'command' or a 'pytest' suite")
    return TestSpec(options=r.cmake_options((*key, "options")), command=command, suite=suite)


def _read_suite(r: Reader, key: Key) -> Suite | None:
    """``pytest:`` (its arguments), ``workers``, ``build``, ``select`` and ``deselect``."""
    suite_keys = ("workers", "build", "select", "deselect", "env")
    if not r.has((*key, "pytest")):
        for name in suite_keys:
            if r.has((*key, name)):
                r.error((*key, name), f"'{name}' narrows or runs a 'pytest' suite: add one")
        return None
    args = r.strings((*key, "pytest"))
    workers = r.get((*key, "workers"))
    if workers is None:
        workers = 1
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        r.error((*key, "workers"), "'workers' must be a whole number of at least 1")
        workers = 1
    return Suite(
        args=args,
        workers=workers,
        build=_read_suite_build(r, (*key, "build")),
        select=r.strings((*key, "select")),
        deselect=_read_deselect(r, (*key, "deselect")),
        env={name: r.string((*key, "env", name)) or "" for name in r.mapping((*key, "env"))},
    )


def _read_suite_build(r: Reader, key: Key) -> SuiteBuild | None:
    if not r.has(key):
        return None
    r.mapping(key)
    r.check_keys(key, SUITE_BUILD_KEYS)
    target = r.string((*key, "target"), required=True) or ""
    package = r.string((*key, "package"), required=True) or ""
    return SuiteBuild(options=r.cmake_options((*key, "options")), target=target, package=package)


def _read_deselect(r: Reader, key: Key) -> tuple[Deselected, ...]:
    """A mapping of test (a path or a node id) to the reason it is left out: never silent."""
    out: list[Deselected] = []
    for test in r.mapping(key):
        reason = r.string((*key, test))
        if not reason or not reason.strip():
            r.error((*key, test), f"deselecting '{test}' needs its reason")
            continue
        out.append(Deselected(test=test, reason=reason.strip()))
    return tuple(out)


def key_bytes(path: Path) -> bytes:
    """What of a recipe feeds its component's key: the file as it is, or, where it names a
    pytest suite, its content without the suite's keys (a suite runs on the built entry: a
    deselection edited must not make a new one)."""
    raw = path.read_bytes()
    data = yaml.safe_load(raw)
    if not isinstance(data, dict):
        return raw
    vendors = data.get("vendors")
    holders = [data, *(v for v in (vendors or {}).values() if isinstance(v, dict))]
    tests = [h for h in holders if isinstance(h.get("test"), dict)]
    if not any(SUITE_ONLY_KEYS & set(h["test"]) for h in tests):
        return raw
    for holder in tests:
        kept = {k: v for k, v in holder["test"].items() if k not in SUITE_ONLY_KEYS}
        if kept:
            holder["test"] = kept
        else:
            del holder["test"]
    return json.dumps(data, sort_keys=True, default=str).encode()
