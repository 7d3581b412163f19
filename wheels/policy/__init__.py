"""Policy as data: what each vendor expects outside a wheel, and the manylinux platform verdict.

``policy/vendors.json`` is the one data entry of each vendor (its plugin module,
``builder/vendors/<name>.py``, is the other half): its ``aliases`` (``ali`` for thead), the
pattern its wheels' local version matches (``local``: ``+cu130``), which libraries the machine
supplies (the driver: ``external``, fnmatch patterns allowed) and which other Python
distributions supply which libraries, in which directory of site-packages (``distributions``;
``"."`` is the top of site-packages, where a torch extension such as flash-attn's
``flash_attn_2_cuda`` lives), which import loads each (``import``) and which imports must
come before that one (``after``: flash-attn's extension needs torch's libraries loaded), and its
PEP 825 variant namespace and provider (``variant``: :mod:`wheels.policy.variants`). This
module loads it (:func:`load_vendor_policy`) and is the one place vendor names are made
canonical (:func:`canonical_vendor`).

The manylinux verdict mirrors auditwheel 6.8 (``auditwheel>=6.8,<6.9`` in pyproject.toml), one
module of ours against each of its, so that a new auditwheel release is re-read file against
file:

- :mod:`wheels.policy.lddtree`: ``auditwheel/lddtree.py`` (``ldd``, ``load_ld_paths``);
- :mod:`wheels.policy.manylinux`: ``auditwheel/policy/__init__.py`` (``WheelPolicies``,
  ``lddtree_external_references``); the policy JSON itself is auditwheel's own;
- :mod:`wheels.policy.elfutils`: ``auditwheel/elfutils.py``;
- :mod:`wheels.policy.wheeltools`: ``get_wheel_architecture``/``get_wheel_libc`` of
  ``auditwheel/wheeltools.py``;
- :mod:`wheels.policy.wheel_abi`: ``auditwheel/wheel_abi.py`` (``analyze_wheel_abi``), whose
  :func:`platform_verdict` is the verdict ``auditwheel show`` gives, computed over ELF data read
  in memory instead of an unpacked wheel.

:mod:`wheels.policy.python_api` (the CPython C-API names) has no auditwheel counterpart.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from builder.core.errors import StackError
from wheels.policy.lddtree import host_library_dirs
from wheels.policy.manylinux import manylinux_policies
from wheels.policy.python_api import is_python_api
from wheels.policy.variants import VariantPolicy, parse_variant
from wheels.policy.wheel_abi import TagVerdict, platform_verdict
from wheels.policy.wheeltools import wheel_platform

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

__all__ = [
    "DistLib",
    "TagVerdict",
    "VariantPolicy",
    "VendorPolicy",
    "canonical_vendor",
    "host_library_dirs",
    "is_python_api",
    "load_vendor_policy",
    "manylinux_policies",
    "platform_verdict",
    "vendor_names",
    "vendor_of_local",
    "wheel_platform",
]


@dataclass(frozen=True)
class DistLib:
    """A library that another Python distribution installs into ``dir`` of site-packages."""

    distribution: str
    dir: str
    # The Python module whose import loads this library (torch: libtorch_python.so). Such a
    # library may only be loaded after that import; see wheels.loading.
    module: str | None = None
    # Modules to import before ``module`` (flash_attn_2_cuda needs what `import torch` loads).
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class VendorPolicy:
    """What one vendor's wheels may take from outside them."""

    name: str
    external: tuple[str, ...]
    distributions: Mapping[str, DistLib] = field(default_factory=lambda: MappingProxyType({}))
    aliases: tuple[str, ...] = ()
    local: re.Pattern[str] | None = None  # what the local version of its wheels starts with
    variant: VariantPolicy | None = None  # its PEP 825 variant data (wheels.policy.variants)

    def is_external(self, soname: str) -> bool:
        return any(fnmatchcase(soname, pattern) for pattern in self.external)

    def supplier(self, soname: str) -> DistLib | None:
        return self.distributions.get(soname)

    def outside_wheel(self, soname: str) -> bool:
        """Libraries the vendor expects to come from the machine or another distribution."""
        return self.is_external(soname) or soname in self.distributions


def load_vendor_policy(name: str) -> VendorPolicy:
    """The policy of vendor ``name`` (aliases such as ``ali`` accepted); KeyError if unknown."""
    canonical = canonical_vendor(name)
    if canonical is None:
        raise KeyError(name)
    return _policies()[canonical]


def vendor_names() -> tuple[str, ...]:
    """Every vendor, in the data's order."""
    return tuple(_policies())


def canonical_vendor(name: str) -> str | None:
    """``ali`` -> ``thead``, ``NVIDIA`` -> ``nvidia``; None for a name no vendor has."""
    key = name.strip().lower()
    policies = _policies()
    if key in policies:
        return key
    return next((p.name for p in policies.values() if key in p.aliases), None)


def vendor_of_local(local: str) -> str | None:
    """The vendor whose wheels' local version ``local`` (``cu130``) is; None when none."""
    key = local.lower()
    return next(
        (p.name for p in _policies().values() if p.local is not None and p.local.match(key)),
        None,
    )


@lru_cache(maxsize=1)
def _policies() -> dict[str, VendorPolicy]:
    with open(os.path.join(os.path.dirname(__file__), "vendors.json"), encoding="utf-8") as fh:
        text = fh.read()
    return _parse(text)


def _parse(text: str) -> dict[str, VendorPolicy]:
    """Every vendor's policy from the text of vendors.json; any problem is a StackError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        _bad_data(f"line {exc.lineno}: {exc.msg}")
    problems: list[str] = []
    if not isinstance(data, dict) or not data:
        _bad_data("expected an object of vendors")
    policies = {v: _vendor_from(v, raw, problems) for v, raw in data.items()}
    problems += [f"{v}: not a vendor name (lowercase letters)" for v in data if not v.isalpha()]
    if problems:
        _bad_data("; ".join(problems))
    return policies


def _bad_data(problem: str) -> NoReturn:
    # The CLI's error family: reported without a traceback.

    raise StackError(f"wheels/policy/vendors.json: {problem}")


def _vendor_from(name: str, raw: Any, problems: list[str]) -> VendorPolicy:
    if not isinstance(raw, dict):
        problems.append(f"{name}: missing or not an object")
        return VendorPolicy(name, ())
    external = raw.get("external", [])
    if not isinstance(external, list) or not all(isinstance(e, str) for e in external):
        problems.append(f"{name}.external: expected a list of strings")
        external = []
    dists: dict[str, DistLib] = {}
    raw_dists = raw.get("distributions", {})
    if not isinstance(raw_dists, dict):
        problems.append(f"{name}.distributions: expected an object")
        raw_dists = {}
    for soname, entry in raw_dists.items():
        lib = _dist_lib(f"{name}.distributions.{soname}", entry, problems)
        if lib is not None:
            dists[soname] = lib
    known = ("aliases", "local", "external", "distributions", "variant")
    problems += [f"{name}: unknown key '{k}'" for k in raw if k not in known]
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        problems.append(f"{name}.aliases: expected a list of strings")
        aliases = []
    return VendorPolicy(
        name,
        tuple(external),
        MappingProxyType(dists),
        tuple(aliases),
        _local(f"{name}.local", raw, problems),
        parse_variant(f"{name}.variant", raw.get("variant"), problems),
    )


def _dist_lib(where: str, entry: Any, problems: list[str]) -> DistLib | None:
    """One ``distributions`` entry; None (with the problems) when it is not one."""
    if not isinstance(entry, dict) or not all(
        isinstance(entry.get(k), str) and entry.get(k) for k in ("distribution", "dir")
    ):
        problems.append(f"{where}: expected {{'distribution': str, 'dir': str}}")
        return None
    module = entry.get("import")
    if module is not None and not _module_name(module):
        problems.append(f"{where}.import: expected a module name")
        module = None
    after = entry.get("after", [])
    if not isinstance(after, list) or not all(_module_name(m) for m in after):
        problems.append(f"{where}.after: expected a list of module names")
        after = []
    if after and module is None:
        problems.append(f"{where}.after: only an entry with an import has imports before it")
    unknown = sorted(set(entry) - {"distribution", "dir", "import", "after"})
    problems += [f"{where}: unknown key '{k}'" for k in unknown]
    where_in_site = posixpath.normpath(entry["dir"])
    if where_in_site == ".":  # site-packages itself, which the audit calls ""
        where_in_site = ""
    return DistLib(entry["distribution"], where_in_site, module, tuple(after))


def _module_name(value: object) -> bool:
    return isinstance(value, str) and all(part.isidentifier() for part in value.split("."))


def _local(where: str, raw: Mapping[str, Any], problems: list[str]) -> re.Pattern[str] | None:
    pattern = raw.get("local")
    if not isinstance(pattern, str):
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        problems.append(f"{where}: not a regular expression ({exc})")
        return None
