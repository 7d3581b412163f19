"""Load and validate stack.yaml and its recipes into a frozen :class:`Stack`.

Every problem in every file is collected and reported together, each located as FILE:LINE:COL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from builder import vendors as vendor_registry
from builder.core.errors import UsageError
from builder.manifest.borrowed import (
    borrowed_source,
    lender_name,
    refuse_own_pins,
    with_own_options,
)
from builder.manifest.contract import check_reasons, read_contract
from builder.manifest.model import (
    CacheSettings,
    CiSettings,
    Component,
    GitSource,
    PathSource,
    Source,
    Stack,
    VendorConfig,
    VendorOverride,
)
from builder.manifest.recipes import load_recipe
from builder.manifest.schema import Doc, Key, Problems, Reader, load_doc, unknown_message
from builder.manifest.suppressions import read_suppressions
from builder.manifest.wheel_reader import read_wheel
from builder.vendors.base import FATBIN_COMPRESSION, VendorSettings

MANIFEST_ENV = "INFINI_STACK_MANIFEST"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")

TOP_KEYS = (
    "schema",
    "name",
    "build_type",
    "cxx_runtime",
    "recipes",
    "vendors",
    "components",
    "wheel",
    "mirrors",
    "cache",
    "contract",
)
CXX_RUNTIMES = ("shared", "any")
VENDOR_KEYS = (
    "cuda_architectures",
    "fatbin_compression",
    "local_version",
    "providers",
    "linked",
    "ci",
    "check",
    "sanitize",
)
CI_KEYS = ("runs-on", "image")
COMPONENT_KEYS = (
    "git",
    "rev",
    "path",
    "source",
    "options",
    "recipe",
    "vendors",
    "only",
    "reason",
)
OVERRIDE_KEYS = ("git", "rev", "path", "options", "reason")
BUILD_TYPES = ("Release", "Debug", "RelWithDebInfo", "MinSizeRel")


BUNDLED_MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "mini-stack" / "stack.yaml"


def default_manifest() -> Path:
    """``$INFINI_STACK_MANIFEST``, else ``./stack.yaml``, else the bundled mini stack (in a
    checkout or an editable install; elsewhere ``./stack.yaml``, which then is not found)."""
    if env := os.environ.get(MANIFEST_ENV):
        return Path(env)
    here = Path("stack.yaml")
    if here.is_file() or not BUNDLED_MANIFEST.is_file():
        return here
    return BUNDLED_MANIFEST


def load_stack(path: Path) -> Stack:
    problems = Problems()
    doc = load_doc(path, problems)
    if doc is None:
        problems.raise_if_any()
        raise AssertionError("unreachable")
    stack = _read_stack(path.resolve(), doc, problems)
    problems.raise_if_any()
    assert stack is not None
    return stack


def _read_stack(path: Path, doc: Doc, problems: Problems) -> Stack | None:
    r = Reader(doc, problems)
    if not isinstance(doc.data, dict):
        r.error((), "the manifest must be a mapping at the top level")
        return None
    r.check_keys((), TOP_KEYS)
    schema = r.get(("schema",))
    if schema not in (None, 1):
        r.error(("schema",), f"unsupported schema {schema!r}; this tool reads schema 1")
    build_type = r.string(("build_type",), default="Release") or "Release"
    if build_type not in BUILD_TYPES:
        r.error(("build_type",), unknown_message("build_type", build_type, BUILD_TYPES))
    cxx_runtime = r.string(("cxx_runtime",), default="any") or "any"
    if cxx_runtime not in CXX_RUNTIMES:
        r.error(("cxx_runtime",), unknown_message("cxx_runtime", cxx_runtime, CXX_RUNTIMES))
    vendor_configs = _read_vendors(r, path.parent)
    mirrors = _read_mirrors(r, path.parent)
    recipes_dir = path.parent / (r.string(("recipes",), default="components") or "components")
    pins = r.mapping(("components",), required=True)
    if not pins and r.has(("components",)):
        r.error(("components",), "no components listed")
    read: dict[str, Component] = {}
    recipe_docs: dict[str, Doc] = {}
    # Those with a pin first: one with ``source: NAME`` takes NAME's (builder.manifest.borrowed).
    for name in sorted(pins, key=lambda n: lender_name(r, ("components", n)) is not None):
        component = _read_component(
            r, name, path.parent, recipes_dir, set(vendor_configs), recipe_docs, read
        )
        if component is not None:
            read[name] = component
    components = {name: read[name] for name in pins if name in read}
    _check_references(r, components, vendor_configs, recipe_docs)
    order = _order(r, components)
    wheel = read_wheel(r, components, vendor_configs)
    contract = read_contract(r)
    check_reasons(r, contract, components)
    return Stack(
        file=path,
        label=doc.label,
        build_type=build_type,
        cxx_runtime=cxx_runtime,
        vendors=vendor_configs,
        components=components,
        order=order,
        wheel=wheel,
        mirrors=mirrors,
        cache=_read_cache(r, path.parent),
        contract=contract,
        suppressions=read_suppressions(recipes_dir, problems),
    )


def _read_vendors(r: Reader, base: Path) -> dict[str, VendorConfig]:
    configs: dict[str, VendorConfig] = {}
    section = r.mapping(("vendors",), required=True)
    for raw_name in section:
        key: Key = ("vendors", raw_name)
        if not vendor_registry.is_known(raw_name):
            known = list(vendor_registry.REGISTRY) + list(vendor_registry.ALIASES)
            r.error(key, unknown_message("vendor", raw_name, known), on_key=True)
            continue
        name = vendor_registry.canonical_name(raw_name)
        if name in configs:
            r.error(key, f"vendor '{raw_name}' is listed twice (as '{name}')", on_key=True)
            continue
        r.mapping(key)
        r.check_keys(key, VENDOR_KEYS)
        archs = r.strings((*key, "cuda_architectures"))
        for i, arch in enumerate(archs):
            if not re.fullmatch(r"\d{2,3}[af]?(-real|-virtual)?|native|all|all-major", arch):
                r.error((*key, "cuda_architectures", i), f"not a CUDA architecture: '{arch}'")
        compression = r.string((*key, "fatbin_compression"))
        if compression is not None and compression not in FATBIN_COMPRESSION:
            choices = ", ".join(FATBIN_COMPRESSION)
            r.error(
                (*key, "fatbin_compression"),
                f"fatbin_compression '{compression}' is not one of: {choices}",
            )
        settings = VendorSettings(
            cuda_architectures=archs,
            local_version=r.string((*key, "local_version")),
            fatbin_compression=compression if compression in FATBIN_COMPRESSION else None,
        )
        configs[name] = VendorConfig(
            name=name,
            settings=settings,
            providers=_read_providers(r, (*key, "providers"), name),
            linked=_read_linked(r, (*key, "linked"), base),
            ci=_read_ci(r, (*key, "ci")),
            check=_read_check(r, (*key, "check"), base),
            sanitize=_read_sanitize(r, (*key, "sanitize")),
        )
    return configs


def _read_sanitize(r: Reader, key: Key) -> str | None:
    """The vendor's sanitizer profile (``address,undefined``, ``thread``), as --sanitize takes
    it; the command line's wins."""
    from builder.core.sanitize import problem

    raw = r.string(key)
    why = problem(raw) if raw is not None else None
    if why is not None:
        r.error(key, why)
        return None
    return raw


def _read_check(r: Reader, key: Key, base: Path) -> Path | None:
    """The vendor's runtime check: a Python script, relative to the manifest."""
    raw = r.string(key)
    if raw is None:
        return None
    script = (base / raw).resolve()
    if not script.is_file():
        r.error(key, f"check script '{raw}' does not exist (looked for {script})")
        return None
    return script


def _read_linked(r: Reader, key: Key, base: Path) -> tuple[Path, ...]:
    """Files declaring the vendor's linked providers (builder.providers.linked), which preflight
    checks like the others; relative to the manifest."""
    files = []
    for i, raw in enumerate(r.strings(key)):
        file = (base / raw).resolve()
        if not file.is_file():
            r.error((*key, i), f"linked providers file not found: {file}")
        files.append(file)
    return tuple(files)


def _read_providers(r: Reader, key: Key, vendor: str) -> dict[str, str]:
    out: dict[str, str] = {}
    known = {p.name for p in vendor_registry.get(vendor).providers()}
    for name in r.mapping(key):
        if name not in known:
            r.error((*key, name), unknown_message(f"{vendor} provider", name, known), on_key=True)
            continue
        spec = r.string((*key, name)) or ""
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            r.error((*key, name), f"'{spec}' is not a PEP 440 version specifier (e.g. '>=12.4')")
            continue
        out[name] = spec
    return out


def _read_ci(r: Reader, key: Key) -> CiSettings:
    r.mapping(key)
    r.check_keys(key, CI_KEYS)
    runs_on = r.get((*key, "runs-on"))
    labels = (runs_on,) if isinstance(runs_on, str) else r.strings((*key, "runs-on"))
    return CiSettings(runs_on=labels, image=r.string((*key, "image")))


def _read_mirrors(r: Reader, root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for url in r.mapping(("mirrors",)):
        target = r.string(("mirrors", url), required=True) or ""
        out[url] = target if "://" in target else str((root / target).resolve())
    return out


def _read_cache(r: Reader, root: Path) -> CacheSettings:
    """``cache:`` is a list of cache URLs, or ``{urls: [...], trust: [...]}``."""
    if not r.has(("cache",)):
        return CacheSettings()
    trust: tuple[str, ...] = ()
    if isinstance(r.get(("cache",)), list):
        urls = r.strings(("cache",))
    else:
        r.mapping(("cache",))
        r.check_keys(("cache",), ("urls", "trust"))
        urls, trust = r.strings(("cache", "urls")), r.strings(("cache", "trust"))
    for i, url in enumerate(urls):
        if not url.startswith(("oci://", "oci+http://", "oci+https://", "file:///")):
            where = ("cache", i) if isinstance(r.get(("cache",)), list) else ("cache", "urls", i)
            r.error(where, f"'{url}' is not a cache URL (oci://HOST/REPOSITORY or file:///DIR)")
    keys = tuple(k if k.startswith("ed25519:") else str((root / k).resolve()) for k in trust)
    return CacheSettings(urls=tuple(urls), trust=keys)


def _read_source(r: Reader, key: Key, root: Path, *, required: bool) -> Source | None:
    has_git, has_path = r.has((*key, "git")), r.has((*key, "path"))
    has_rev = r.has((*key, "rev"))
    if has_git and has_path:
        r.error(key, "give either 'git' (with 'rev') or 'path', not both")
        return None
    if has_path:
        raw = r.string((*key, "path"), required=True) or ""
        path = (root / raw).resolve()
        if not path.is_dir():
            r.error((*key, "path"), f"path source '{raw}' is not a directory ({path})")
        return PathSource(path=path)
    if has_git or has_rev:
        url = r.string((*key, "git"), required=required)
        rev = r.string((*key, "rev"), required=True) or ""
        if rev and not SHA_RE.match(rev):
            r.error(
                (*key, "rev"),
                f"a git pin must be a full 40-hex commit SHA, not '{rev}'; "
                "resolve a branch or tag with `infini-stack lock COMPONENT=REF`",
            )
        return GitSource(url=url or "", rev=rev) if url or not required else None
    if required:
        r.error(key, "missing a source: give 'git' and 'rev', or 'path'")
    return None


def _read_component(
    r: Reader,
    name: str,
    root: Path,
    recipes_dir: Path,
    vendors: set[str],
    recipe_docs: dict[str, Doc],
    read: Mapping[str, Component],
) -> Component | None:
    key: Key = ("components", name)
    if not NAME_RE.match(name):
        r.error(
            key,
            f"component name '{name}' must be lower case letters, digits, '-' or '_'",
            on_key=True,
        )
    if not isinstance(r.get(key), dict):
        r.mapping(key)
        return None
    r.check_keys(key, COMPONENT_KEYS)
    lender = lender_name(r, key)
    borrowed = None
    if lender is not None:
        refuse_own_pins(r, key, lender)
        borrowed = borrowed_source(r, key, lender, read)
    source = borrowed[0] if borrowed else None
    if lender is None:
        source = _read_source(r, key, root, required=True)
    options = r.cmake_options((*key, "options"))
    overrides = _read_overrides(r, key, root, vendors, source if lender is None else None)
    recipe_file = r.string((*key, "recipe"))
    recipe_path = (root / recipe_file) if recipe_file else recipes_dir / f"{name}.yaml"
    loaded = load_recipe(name, recipe_path, r, (*key, "recipe") if recipe_file else key)
    if source is None or loaded is None:
        return None
    if borrowed is not None:
        overrides = with_own_options(borrowed[1], {v: o.options for v, o in overrides.items()})
    recipe, recipe_docs[name] = loaded
    return Component(
        name=name,
        source=source,
        options=options,
        overrides=overrides,
        recipe=recipe,
        only=_read_only(r, (*key, "only"), vendors),
        reason=read[lender].reason if lender else r.string((*key, "reason")),
        borrows=lender,
    )


def _read_overrides(
    r: Reader, key: Key, root: Path, vendors: set[str], source: Source | None
) -> dict[str, VendorOverride]:
    """``vendors.V`` of a component: its options, and its own pin where it has one (``source``:
    the component's own; None for one with ``source: NAME``, which pins nothing)."""
    overrides: dict[str, VendorOverride] = {}
    for raw_vendor in r.mapping((*key, "vendors")):
        vkey: Key = (*key, "vendors", raw_vendor)
        vendor = (
            vendor_registry.canonical_name(raw_vendor)
            if vendor_registry.is_known(raw_vendor)
            else raw_vendor
        )
        if vendor not in vendors:
            r.error(vkey, unknown_message("vendor", raw_vendor, vendors, ("vendors",)), on_key=True)
            continue
        r.mapping(vkey)
        r.check_keys(vkey, OVERRIDE_KEYS)
        override_source = _read_source(r, vkey, root, required=False) if source else None
        if isinstance(override_source, GitSource) and not override_source.url:
            base_url = source.url if isinstance(source, GitSource) else ""
            override_source = GitSource(url=base_url, rev=override_source.rev)
        overrides[vendor] = VendorOverride(
            source=override_source,
            options=r.cmake_options((*vkey, "options")),
            reason=r.string((*vkey, "reason")),
        )
    return overrides


def _read_only(r: Reader, key: Key, vendors: set[str]) -> frozenset[str] | None:
    """``only: [nvidia]``: the vendors whose stack has the component (default: all)."""
    if not r.has(key):
        return None
    names = r.strings(key)
    only: set[str] = set()
    for i, raw in enumerate(names):
        vendor = vendor_registry.canonical_name(raw) if vendor_registry.is_known(raw) else raw
        if vendor in vendors:
            only.add(vendor)
        else:
            r.error((*key, i), unknown_message("vendor", raw, vendors, ("vendors",)))
    if not names:
        r.error(key, "'only' must name at least one vendor (leave the component out instead)")
    return frozenset(only) if only else None  # after an error: every stack, so as not to cascade


def _check_references(
    r: Reader,
    components: dict[str, Component],
    vendors: dict[str, VendorConfig],
    recipe_docs: dict[str, Doc],
) -> None:
    for name, component in components.items():
        recipe = component.recipe
        rr = Reader(recipe_docs[name], r.problems)
        for i, dep in enumerate(recipe.depends):
            if dep not in components:
                rr.error(("depends", i), unknown_message("component", dep, components))
        for raw in rr.mapping(("vendors",)):
            for i, dep in enumerate(rr.strings(("vendors", raw, "depends"))):
                if dep not in components:
                    key = ("vendors", raw, "depends", i)
                    rr.error(key, unknown_message("component", dep, components))
        for vendor in vendors:
            if not component.in_stack(vendor):
                continue
            if vendor not in recipe.vendors:
                supported = ", ".join(recipe.vendors) or "none"
                r.error(
                    ("vendors", _raw_vendor_key(r, vendor)),
                    f"component '{name}' does not support vendor '{vendor}' "
                    f"(its recipe {recipe.file.name} supports: {supported})",
                    on_key=True,
                )
            for dep in recipe.depends_for(vendor):
                if dep in components and not components[dep].in_stack(vendor):
                    only = ", ".join(sorted(components[dep].only or ()))
                    r.error(
                        ("components", dep, "only"),
                        f"component '{name}' depends on '{dep}' for {vendor}, but '{dep}' is "
                        f"only in the stack of: {only}",
                    )
            if recipe.patches_for(vendor) and isinstance(component.source_for(vendor), PathSource):
                rr.error(
                    ("patches",),
                    f"component '{name}' has patches, but its {vendor} source is a path "
                    "source, which is built in place: patches apply to a git checkout",
                )


def _raw_vendor_key(r: Reader, vendor: str) -> str:
    for raw in r.mapping(("vendors",)):
        if vendor_registry.is_known(raw) and vendor_registry.canonical_name(raw) == vendor:
            return str(raw)
    return vendor


def _order(r: Reader, components: dict[str, Component]) -> tuple[str, ...]:
    """Dependencies first; otherwise the manifest's own order, so plans read as the file does."""
    graph = {
        name: [d for d in c.recipe.every_depends() if d in components]
        for name, c in components.items()
    }
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        cycle: list[str] = list(exc.args[1])
        r.error(("components", cycle[0]), "dependency cycle: " + " -> ".join(cycle), on_key=True)
        return tuple(components)
    order: list[str] = []
    while len(order) < len(graph):
        order.append(next(n for n in graph if n not in order and set(graph[n]) <= set(order)))
    return tuple(order)


def resolve_vendor(stack: Stack, name: str) -> str:
    """Canonical vendor name, which must be declared in the manifest."""
    vendor = vendor_registry.canonical_name(name)
    if vendor not in stack.vendors:
        raise UsageError(
            f"vendor '{vendor}' is not declared in {stack.label}",
            hint=f"declared vendors: {', '.join(stack.vendors)}",
        )
    return vendor
