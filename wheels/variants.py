"""PEP 825 variant wheels: the properties of what was built, ``variant.json``, and the
index-level ``{name}-{version}-variants.json``.

The format, and where each field comes from:

- PEP 825 "Variant metadata": ``*.dist-info/variant.json`` holds ``$schema``,
  ``default-priorities`` with ``namespace`` (every namespace of the project, most preferred
  first) and ``variants``, which in a wheel maps exactly one label, the one in its file name, to
  ``{namespace: {feature: [values]}}``, the values sorted (PEP 825 "Variants").
- PEP 825 "Variant properties": namespaces and feature names match ``^[a-z0-9_]+$``, values
  ``^[a-z0-9_.]+$``.
- PEP 850 (providers; the draft that was PEP 826, metadata format 0.2.0) adds ``providers``:
  one entry per namespace of ``default-priorities.namespace``, with ``requires`` (and
  ``plugin-api``) or ``static-properties`` (and ``feature-order`` when it has several
  features), and ``optional``. ``$schema`` is the URL variantlib 0.2.2, the reference
  implementation, writes for that format.
- PEP 825 "Index-level metadata" and "Metadata consistency": the index file has the same
  structure with every variant of the release; combining keeps the longer namespace list when
  one starts with the other, and the union of ``variants`` where a label always maps to the
  same properties.

Everything is written with sorted keys and a fixed layout: the same build gives the same bytes.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wheels.cuda import FATBIN_SECTIONS
from wheels.cuda.fatbin import DeviceCode, FatbinError, read_device_code
from wheels.elf import ElfError, section_bytes
from wheels.naming import (
    NULL_VARIANT,
    VARIANT_FILE,
    VARIANT_LABEL,
    index_file_name,
    split_variant,
)
from wheels.policy import VariantPolicy, load_vendor_policy

SCHEMA_URL = "https://variants-schema.wheelnext.dev/v0.2.0.json"
NAME = re.compile(r"^[a-z0-9_]+$")
VALUE = re.compile(r"^[a-z0-9_.]+$")

Properties = dict[str, dict[str, list[str]]]  # namespace -> feature -> sorted values


class VariantError(ValueError):
    """Variant metadata that cannot be written or combined; says why."""


# --- what was built -----------------------------------------------------------------------------


def elf_device_code(data: bytes) -> DeviceCode:
    """The CUDA device code an ELF file's fat binary sections hold (empty when none, or when
    the bytes are not an ELF file with readable fat binaries)."""
    try:
        sections = {n: b for n in FATBIN_SECTIONS if (b := section_bytes(data, n)) is not None}
        return read_device_code(sections)
    except (ElfError, FatbinError):
        return DeviceCode()


def arch_values(code: DeviceCode) -> list[str]:
    """``nvidia :: sm_arch`` values of the code the runtime loads: ``75_real`` for SASS for
    sm_75, ``75_virtual`` for PTX for compute_75 (the CMake spelling the NVIDIA provider uses);
    an arch-specific or family suffix (``90a``, ``100f``) is the same compute capability."""
    loaded = code.loaded()
    values = {f"{e.arch}_real" for e in loaded.entries if e.kind == "sass"}
    values |= {f"{e.arch}_virtual" for e in loaded.entries if e.kind == "ptx"}
    return sorted(values)


def staged_device_code(root: Path) -> dict[str, DeviceCode]:
    """Each staged ELF file's device code, by path relative to ``root`` (files with none left
    out)."""
    found: dict[str, DeviceCode] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            code = elf_device_code(path.read_bytes())
            if code.entries:
                found[path.relative_to(root).as_posix()] = code
    return found


def toolkit_bound(version: str | None) -> str | None:
    """``13.0.88`` -> ``13.0``: the toolkit's major.minor, the runtime the wheel was built for."""
    match = re.match(r"^(\d+)(?:\.(\d+))?", version or "")
    return f"{match.group(1)}.{match.group(2) or 0}" if match else None


def properties_of(
    policy: VariantPolicy | None,
    *,
    toolkit_version: str | None,
    architectures: Sequence[str],
    device_code: Mapping[str, DeviceCode],
) -> Properties:
    """The variant properties of a vendor's wheel from what was built: the toolkit that built
    it, and the architectures its ELF files carry code for (or that its compiler was given)."""
    if policy is None:
        return {}
    features: dict[str, list[str]] = {}
    bound = toolkit_bound(toolkit_version)
    if bound is not None:
        features[policy.toolkit] = [bound]
    if policy.arch_from == "cuda-fatbin":
        archs = sorted({v for code in device_code.values() for v in arch_values(code)})
    elif policy.arch_from == "cuda_architectures":
        archs = sorted({re.sub(r"[^0-9a-z_.]", "", a.lower()) for a in architectures} - {""})
    else:
        archs = []
    if archs:
        features[policy.arch] = archs
    _check_static(policy, features)
    return {policy.namespace: features} if features else {}


def _check_static(policy: VariantPolicy, features: Mapping[str, list[str]]) -> None:
    """A value the provider's static list does not have would make the wheel never selected."""
    static = policy.provider.get("static-properties")
    if not isinstance(static, Mapping):
        return
    for feature, values in features.items():
        unknown = sorted(set(values) - set(static.get(feature, ())))
        if unknown:
            raise VariantError(
                f"{policy.namespace} :: {feature} :: {', '.join(unknown)} is not in the static "
                f"properties of the {policy.namespace} provider (wheels/policy/vendors.json), "
                "so no installer would ever select the wheel"
            )


# --- variant.json -------------------------------------------------------------------------------


def stack_metadata(vendors: Iterable[str]) -> tuple[list[str], dict[str, Any]]:
    """``default-priorities.namespace`` and ``providers`` of a stack's vendors, project-wide:
    the same in every wheel of the stack (PEP 825 "Default priorities")."""
    namespaces: list[str] = []
    providers: dict[str, Any] = {}
    for vendor in vendors:
        policy = load_vendor_policy(vendor).variant
        if policy is not None and policy.namespace not in providers:
            namespaces.append(policy.namespace)
            providers[policy.namespace] = dict(policy.provider)
    return namespaces, providers


def document(
    label: str, properties: Properties, namespaces: Sequence[str], providers: Mapping[str, Any]
) -> dict[str, Any]:
    """A wheel's ``variant.json`` (PEP 825 "Variant metadata", with PEP 850's providers)."""
    doc = {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": list(namespaces)},
        "providers": {ns: dict(providers[ns]) for ns in namespaces},
        "variants": {label: _sorted(properties)},
    }
    problems = problems_of(doc, label)
    if problems:
        raise VariantError(f"variant metadata for '{label}': {problems[0]}")
    return doc


def _sorted(properties: Properties) -> Properties:
    return {
        ns: {feature: sorted(set(values)) for feature, values in sorted(features.items())}
        for ns, features in sorted(properties.items())
    }


def dumps(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def problems_of(doc: Any, label: str | None = None) -> list[str]:
    """What makes ``doc`` not PEP 825 variant metadata (with PEP 850 providers); for a
    wheel's ``variant.json`` (``label`` given) also that it describes exactly that label."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    problems = [f"missing key '{k}'" for k in ("$schema", "default-priorities", "variants")]
    problems = [p for p in problems if p.split("'")[1] not in doc]
    extra = sorted(set(doc) - {"$schema", "default-priorities", "variants", "providers"})
    problems += [f"unknown key '{k}'" for k in extra]
    namespaces = (doc.get("default-priorities") or {}).get("namespace")
    if not isinstance(namespaces, list) or not namespaces:
        problems.append("default-priorities.namespace must be a non-empty list")
        namespaces = []
    problems += [f"namespace '{n}' does not match [a-z0-9_]+" for n in namespaces if not _ok(n)]
    providers = doc.get("providers", {})
    if not isinstance(providers, dict) or set(providers) != set(namespaces):
        problems.append("providers must name exactly the namespaces of default-priorities")
    variants = doc.get("variants")
    if not isinstance(variants, dict):
        return [*problems, "variants must be an object"]
    if label is not None and list(variants) != [label]:
        problems.append(f"variants must hold exactly the label '{label}', not {list(variants)}")
    for name, props in variants.items():
        problems += _variant_problems(name, props, namespaces)
    return problems


def _ok(name: object, pattern: re.Pattern[str] = NAME) -> bool:
    return isinstance(name, str) and bool(pattern.match(name))


def _variant_problems(label: str, props: Any, namespaces: Sequence[str]) -> list[str]:
    if not VARIANT_LABEL.match(label):
        return [f"label '{label}' does not match [0-9a-z_.]+"]
    if not isinstance(props, dict):
        return [f"variants.{label} must be an object"]
    if (label == NULL_VARIANT) != (not props):
        return [f"'{NULL_VARIANT}' is the label of the variant with no properties, and only it"]
    problems: list[str] = []
    for ns, features in props.items():
        if ns not in namespaces:
            problems.append(f"variants.{label}: namespace '{ns}' is not in default-priorities")
        if not isinstance(features, dict) or not features:
            problems.append(f"variants.{label}.{ns} must be a non-empty object")
            continue
        for feature, values in features.items():
            where = f"variants.{label}.{ns}.{feature}"
            if not _ok(feature):
                problems.append(f"{where}: feature name does not match [a-z0-9_]+")
            if not isinstance(values, list) or not values or values != sorted(set(values)):
                problems.append(f"{where}: values must be a non-empty sorted list of strings")
            elif not all(_ok(v, VALUE) for v in values):
                problems.append(f"{where}: a value does not match [a-z0-9_.]+")
    return problems


def read_from_wheel(wheel: Path) -> dict[str, Any] | None:
    """The ``variant.json`` in a wheel's ``.dist-info``; None when it has none."""
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if _is_variant_file(n)), None)
        if name is None:
            return None
        data: dict[str, Any] = json.loads(zf.read(name))
        return data


def _is_variant_file(member: str) -> bool:
    top, _, rest = member.partition("/")
    return top.endswith(".dist-info") and rest == VARIANT_FILE


# --- the index file -----------------------------------------------------------------------------


def combine(docs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Variant metadata combined per PEP 825 "Metadata consistency"; VariantError where the
    inputs disagree."""
    namespaces: list[str] = []
    providers: dict[str, Any] = {}
    variants: dict[str, Any] = {}
    for doc in docs:
        theirs = list(doc["default-priorities"]["namespace"])
        shorter, longer = sorted((namespaces, theirs), key=len)
        if longer[: len(shorter)] != shorter:
            raise VariantError(f"namespace priorities {namespaces} and {theirs} disagree")
        namespaces = list(longer)
        _union(providers, doc.get("providers", {}), "providers")
        _union(variants, doc["variants"], "variants")
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": namespaces},
        "providers": providers,
        "variants": dict(sorted(variants.items())),
    }


def _union(into: dict[str, Any], more: Mapping[str, Any], what: str) -> None:
    for key, value in more.items():
        if into.setdefault(key, value) != value:
            raise VariantError(f"{what}.{key} differs between two wheels of the release")


def write_index(directory: Path, distribution: str, version: str) -> Path | None:
    """``{name}-{version}-variants.json`` for the variant wheels of that version in
    ``directory`` (None, and no file, when there are none)."""
    target = directory / index_file_name(distribution, version)
    stem = target.name.removesuffix("-variants.json") + "-"
    wheels = [
        p
        for p in sorted(directory.glob("*.whl"))
        if p.name.startswith(stem) and split_variant(p.name)[1] is not None
    ]
    docs = [doc for p in wheels if (doc := read_from_wheel(p)) is not None]
    if not docs:
        return None
    target.write_bytes(dumps(combine(docs)))
    return target
