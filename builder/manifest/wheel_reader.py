"""stack.yaml's ``wheel:``: what the vendor's wheel is made of, read and checked."""

from __future__ import annotations

import re
from collections.abc import Collection

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from builder.manifest.model import Component
from builder.manifest.schema import Key, Reader, unknown_message
from wheels.sizes import parse_size
from wheels.spec import WheelSpec

WHEEL_KEYS = (
    "name",
    "version",
    "component",
    "python_dir",
    "packages",
    "library_dir",
    "bundle",
    "requires",
    "requires_python",
    "summary",
    "variant",
    "max_size",
    "pythons",
)
_PYTHON = re.compile(r"^3\.\d{1,2}$")


def read_wheel(
    r: Reader, components: dict[str, Component], vendors: Collection[str]
) -> WheelSpec | None:
    if not r.has(("wheel",)):
        return None
    key: Key = ("wheel",)
    r.mapping(key)
    r.check_keys(key, WHEEL_KEYS)
    version = r.string((*key, "version"), required=True) or "0"
    try:
        Version(version)
    except InvalidVersion:
        r.error((*key, "version"), f"'{version}' is not a PEP 440 version")
    component = r.string((*key, "component"), required=True) or ""
    if component and component not in components:
        r.error((*key, "component"), unknown_message("component", component, components))
    elif component and not all(components[component].in_stack(v) for v in vendors):
        r.error((*key, "component"), f"the wheel's component '{component}' is not in every stack")
    bundle = r.strings((*key, "bundle"))
    for i, name in enumerate(bundle):
        if name not in components:
            r.error((*key, "bundle", i), unknown_message("component", name, components))
        elif not all(components[name].in_stack(v) for v in vendors):
            r.error((*key, "bundle", i), f"bundled component '{name}' is not in every stack")
    requires_python = r.string((*key, "requires_python"), default=">=3.10") or ">=3.10"
    try:
        SpecifierSet(requires_python)
    except InvalidSpecifier:
        r.error((*key, "requires_python"), f"'{requires_python}' is not a version specifier")
    packages = r.strings((*key, "packages"))
    default_libdir = f"{packages[0]}/lib" if packages else "lib"
    if not packages:
        r.error(key, "a wheel needs at least one entry in 'packages'")
    return WheelSpec(
        name=r.string((*key, "name"), required=True) or "",
        version=version,
        component=component,
        python_dir=r.string((*key, "python_dir"), default="python") or "python",
        packages=packages,
        library_dir=r.string((*key, "library_dir"), default=default_libdir) or "lib",
        bundle=bundle,
        requires=r.strings((*key, "requires")),
        requires_python=requires_python,
        summary=r.string((*key, "summary"), default="") or "",
        variant=r.boolean((*key, "variant")),
        max_size=_read_size(r, (*key, "max_size")),
        pythons=_read_pythons(r, (*key, "pythons"), requires_python),
    )


def _read_pythons(r: Reader, key: Key, requires_python: str) -> tuple[str, ...]:
    """``X.Y`` versions, each once, each allowed by ``requires_python``."""
    pythons = r.strings(key)
    raw = r.get(key)
    numbers = (
        {i for i, v in enumerate(raw) if isinstance(v, float)} if isinstance(raw, list) else ()
    )
    try:
        allowed = SpecifierSet(requires_python)
    except InvalidSpecifier:
        allowed = SpecifierSet()  # reported above
    for i, python in enumerate(pythons):
        if i in numbers:
            r.error((*key, i), f"quote {python}: YAML reads an unquoted 3.10 as the number 3.1")
        elif not _PYTHON.match(python):
            r.error((*key, i), f"'{python}' is not a CPython version X.Y (such as 3.12)")
        elif Version(python) not in allowed:
            r.error((*key, i), f"Python {python} is outside requires_python '{requires_python}'")
        elif python in pythons[:i]:
            r.error((*key, i), f"Python {python} is listed twice")
    return pythons


def _read_size(r: Reader, key: Key) -> int | None:
    """A size in bytes: a number, or a string such as ``100MB`` or ``95 MiB``."""
    text = r.string(key)
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        r.error(key, str(exc))
        return None
