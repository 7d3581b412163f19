"""The one place that decides wheel names: distribution, local version per vendor, tags, and
the PEP 825 variant label.

A variant wheel (PEP 825, "Variant label") is named
``{distribution}-{version}-{python tag}-{abi tag}-{platform tag}-{variant label}.whl``. Its
version is the public one (``0.1.0``): the vendor's wheels of one release are variants of one
version, told apart by their label, which is the vendor's local version (``cu130``,
``musa43``, ``ppu12``); a vendor whose wheel carries no variant property (cpu) is the
``null`` variant, which PEP 825 reserves for the variant with zero properties.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from wheels.filename import (
    InvalidWheelName,
    canonicalize_name,
    normalized_version,
    parse_wheel_filename,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

# A CPython extension module's file name: `<module>.<cpython-312-x86_64-linux-gnu|abi3|...>.so`.
_EXTENSION = re.compile(r"^(?P<mod>[A-Za-z_]\w*)\.(cpython-[^./]+|abi3|pypy[^./]*)\.so$")
_BARE_MODULE = re.compile(r"^(?P<mod>[A-Za-z_]\w*)\.so$")


def extension_parts(filename: str) -> tuple[str, str] | None:
    """(module, tag) of an extension module's file name: ``("_ssl", "cpython-311-x86_64-linux-
    gnu")`` for ``_ssl.cpython-311-x86_64-linux-gnu.so``, ``("x", "abi3")`` for ``x.abi3.so``;
    None for any other name."""
    match = _EXTENSION.match(filename)
    return (match[1], match[2]) if match else None


def bare_module(filename: str) -> str | None:
    """The module of a bare ``NAME.so``; None otherwise."""
    match = _BARE_MODULE.match(filename)
    return match[1] if match else None


@dataclass(frozen=True, kw_only=True)
class WheelName:
    """A wheel's name, in its parts."""

    distribution: str  # as written in METADATA
    version: str  # including the local part, e.g. 0.1.0+cu130
    python_tag: str
    abi_tag: str
    platform_tag: str
    variant: str | None = None  # the PEP 825 variant label; None: not a variant wheel

    @property
    def filename(self) -> str:
        label = f"-{self.variant}" if self.variant is not None else ""
        return f"{escaped_name(self.distribution)}-{self.version}-{self.tag}{label}.whl"

    @property
    def tag(self) -> str:
        return f"{self.python_tag}-{self.abi_tag}-{self.platform_tag}"

    @property
    def dist_info(self) -> str:
        return f"{escaped_name(self.distribution)}-{self.version}.dist-info"


_NOT_NAME = re.compile(r"[^\w\d.]+")
_NOT_LABEL = re.compile(r"[^0-9a-z_.]+")


def escaped_name(distribution: str) -> str:
    """The distribution's name as wheel file and .dist-info names spell it: ``my_pkg``."""
    return _NOT_NAME.sub("_", canonicalize_name(distribution))


def with_local(version: str, local: str) -> str:
    """``0.1.0`` + ``cu130`` -> ``0.1.0+cu130`` (normalised, validated by packaging)."""
    return normalized_version(f"{version}+{local}" if local else version)


def worktree_local(local: str, dirty: bool | None) -> str:
    """The local version of a wheel with a component from a working tree (``--worktree``):
    ``.dirty`` when a tree has uncommitted changes, else ``.dev``; ``dirty`` None (every
    component from its pin) leaves ``local`` as it is."""
    if dirty is None:
        return local
    segment = "dirty" if dirty else "dev"
    return f"{local}.{segment}" if local else segment


# The local version segment of a sanitized build's wheel (never released: wheel --sanitize, for
# local testing), and the profile each names (builder.core.sanitize).
SANITIZED = {"asan": "address,undefined", "tsan": "thread", "ubsan": "undefined"}


def sanitized_local(local: str, label: str | None) -> str:
    """``cpu`` + ``asan`` -> ``cpu.asan``: a sanitized build's wheel says so in its version."""
    if label is None:
        return local
    return f"{local}.{label}" if local else label


def sanitizer_of_wheel(filename: str) -> str | None:
    """The sanitizer profile (``address,undefined``) a wheel's local version names; None for a
    plain wheel."""
    version = filename.split("-")[1] if filename.count("-") >= 4 else ""
    segments = version.partition("+")[2].lower().split(".")
    return next((SANITIZED[s] for s in segments if s in SANITIZED), None)


# The ABI partners a local version names, with their major.minor: torch's C++ ABI changes
# between minor versions and users pick a wheel by the torch they have (flash-attn's release
# wheels name torch2.x too). Requires-Dist pins each partner (wheels.audit.abi_partners).
LOCAL_PARTNERS = ("torch",)
_MAJOR_MINOR = re.compile(r"^(\d+)\.(\d+)")


def partner_local(local: str, partners: Mapping[str, str]) -> str:
    """``cu130`` with ``{"torch": "2.11.0+cu130"}`` -> ``cu130.torch2.11``: the vendor's local
    version, then each of :data:`LOCAL_PARTNERS` built against, as major.minor."""
    parts = [local] if local else []
    for name in LOCAL_PARTNERS:
        match = _MAJOR_MINOR.match(partners.get(name, ""))
        if match:
            parts.append(f"{name}{match.group(1)}.{match.group(2)}")
    return ".".join(parts)


def interpreter_tags(python: str | None = None) -> tuple[str, str]:
    """The CPython tags an extension built for ``python`` (X.Y; None: this interpreter) needs
    (``cp311``, ``cp311``)."""
    tag = "cp" + (python or f"{sys.version_info.major}.{sys.version_info.minor}").replace(".", "")
    return tag, tag


def platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def wheel_name(
    distribution: str,
    version: str,
    local: str,
    *,
    platform: str | None = None,
    python: str | None = None,
) -> WheelName:
    python_tag, abi_tag = interpreter_tags(python)
    return WheelName(
        distribution=distribution,
        version=with_local(version, local),
        python_tag=python_tag,
        abi_tag=abi_tag,
        platform_tag=platform or platform_tag(),
    )


NULL_VARIANT = "null"  # PEP 825: the label of the variant with zero properties
VARIANT_FILE = "variant.json"  # PEP 825: the variant metadata, in .dist-info
VARIANT_LABEL = re.compile(r"^[0-9a-z_.]+$")  # PEP 825, "Variant label"


def variant_label(local: str, *, has_properties: bool) -> str:
    """The variant label of a vendor's wheel: its local version (``cu130``), lowercased, or
    ``null`` for a wheel with no variant property."""
    if not has_properties:
        return NULL_VARIANT
    label = _NOT_LABEL.sub("_", local.lower()).strip("_")
    if not label or label == NULL_VARIANT:
        raise ValueError(f"no variant label can be made of the local version '{local}'")
    return label


def variant_name(distribution: str, version: str, local: str, *, has_properties: bool) -> WheelName:
    """The variant wheel's name: the public version (no local part) and the label."""
    name = wheel_name(distribution, version, "")
    return replace(name, variant=variant_label(local, has_properties=has_properties))


def split_variant(filename: str) -> tuple[str, str | None]:
    """``x-1.0-cp311-cp311-linux_x86_64-cu130.whl`` -> (``x-1.0-cp311-cp311-linux_x86_64.whl``,
    ``cu130``); a name without a variant label comes back as it is, with None.

    PEP 825: the label follows the platform tag; a Python tag never starts with a digit, so six
    parts whose third starts with a digit carry a build tag instead."""
    if not filename.endswith(".whl"):
        return filename, None
    parts = filename[: -len(".whl")].split("-")
    has_label = len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit())
    if not has_label:
        return filename, None
    return "-".join(parts[:-1]) + ".whl", parts[-1]


def index_file_name(distribution: str, version: str) -> str:
    """PEP 825's index-level metadata file, ``{name}-{version}-variants.json``, with name and
    version normalised as in wheel file names."""
    return f"{escaped_name(distribution)}-{normalized_version(version)}-variants.json"


def vendor_of_variant(label: str) -> str | None:
    """The vendor a variant label names: ``null`` is cpu's, otherwise the local-version
    pattern of each vendor (a label is a local version)."""
    from wheels.policy import vendor_of_local as by_local

    return "cpu" if label == NULL_VARIANT else by_local(label)


def vendor_of_local(version: str) -> str | None:
    """Which vendor a version's local part names (``+cpu``, ``+cu130``/``+cuda``, ``+musa40``,
    ``+ppu12``: each vendor's pattern in wheels/policy/vendors.json); None when it names none."""
    from wheels.policy import vendor_of_local as by_local

    local = version.partition("+")[2]
    return by_local(local) if local else None


def vendor_of_wheel(filename: str) -> str | None:
    """The vendor a wheel's file name names: its variant label, else its local version; None
    when it names none or is not a wheel file name."""

    base, label = split_variant(filename)
    if label is not None:  # a PEP 825 variant wheel: its label names the vendor
        return vendor_of_variant(label)
    try:
        _, version, _, _ = parse_wheel_filename(base)
    except InvalidWheelName:
        return None
    return vendor_of_local(str(version))
