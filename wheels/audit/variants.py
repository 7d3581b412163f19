"""A PEP 825 variant wheel's metadata against its name and its contents.

A wheel whose file name carries a variant label must hold ``.dist-info/variant.json`` that is
valid variant metadata for exactly that label (:func:`wheels.variants.problems_of`). Where the
vendor's architectures are read from CUDA fat binaries (``arch_from: cuda-fatbin`` in
wheels/policy/vendors.json), every declared ``sm_arch`` must be backed: ``N_real`` by SASS for
sm_N and ``N_virtual`` by PTX for compute_N, in every ELF file that carries device code (a
library without it fails there with "no kernel image is available"); code for an architecture
the wheel does not declare is a warning. The declared CUDA runtime lower bound must be of the
major version of the ``libcudart.so.N`` the ELF files need.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from wheels.audit.archive import Archive, read_member
from wheels.audit.findings import Findings
from wheels.audit.raw import MemberError
from wheels.elf import ElfInfo
from wheels.naming import VARIANT_FILE, split_variant, vendor_of_variant
from wheels.policy import VariantPolicy, VendorPolicy

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from wheels.cuda.fatbin import DeviceCode

CODE = "variant-metadata"


_CUDART = re.compile(r"libcudart\.so\.(\d+)")


def check_variant(
    archive: Archive,
    elfs: Mapping[str, ElfInfo],
    devices: Mapping[str, DeviceCode],
    policy: VendorPolicy,
    f: Findings,
) -> None:
    """The variant checks; nothing to do for a wheel that is not a variant and says none.
    ``devices``: the device code the member scan read, by ELF file (those with some)."""
    label = split_variant(archive.name)[1]
    doc = _read(archive, label, f)
    if label is None or doc is None:
        return
    from wheels.variants import problems_of  # (the variant rules, for a variant wheel only)

    named = vendor_of_variant(label)
    if named is not None and named != policy.name:
        f.violation(CODE, None, f"the label '{label}' names {named}, audited as {policy.name}")
    problems = problems_of(doc, label)
    for problem in problems:
        f.violation(CODE, _member(archive), problem)
    variant = policy.variant
    if problems or variant is None or variant.arch_from != "cuda-fatbin":
        return
    declared = doc["variants"][label].get(variant.namespace, {})
    _check_archs(variant, declared.get(variant.arch, []), devices, f)
    _check_runtime(variant, declared.get(variant.toolkit, []), elfs, f)


def _member(archive: Archive) -> str:
    return f"{archive.dist_info}/{VARIANT_FILE}"


def _read(archive: Archive, label: str | None, f: Findings) -> Any:
    if archive.dist_info is None:
        return None
    try:
        text = read_member(archive, _member(archive))
    except KeyError:
        if label is not None:
            f.violation(CODE, None, f"a variant wheel ('{label}') without {VARIANT_FILE}")
        return None
    except MemberError as exc:
        f.violation(CODE, _member(archive), f"cannot read: {exc}")
        return None
    if label is None:
        f.warning(CODE, _member(archive), "variant metadata in a wheel whose name has no label")
        return None

    try:
        return json.loads(text)
    except ValueError as exc:
        f.violation(CODE, _member(archive), f"not JSON: {exc}")
        return None


def _check_archs(
    variant: VariantPolicy, declared: list[str], codes: Mapping[str, DeviceCode], f: Findings
) -> None:
    from wheels.variants import arch_values

    found = {n: set(arch_values(c)) for n, c in codes.items() if c.loaded().entries}
    union = set().union(*found.values())
    what = f"{variant.namespace} :: {variant.arch}"
    for value in declared:
        if value not in union:
            f.violation("variant-arch", None, f"declares {what} :: {value}, {_missing(value)}")
            continue
        for member, values in found.items():
            if value not in values:
                f.violation("variant-arch", member, f"{_missing(value)} ({what} :: {value})")
    for value in sorted(union - set(declared)):
        holders = ", ".join(sorted(m for m, v in found.items() if value in v))
        f.warning("variant-arch", None, f"{holders} carries code for {value}, not in {what}")


def _missing(value: str) -> str:
    arch, _, kind = value.partition("_")
    if kind == "real":
        return f"but no SASS for sm_{arch} is there"
    return f"but no PTX for compute_{arch} is there"


def _check_runtime(
    variant: VariantPolicy, declared: list[str], elfs: Mapping[str, ElfInfo], f: Findings
) -> None:
    majors = {
        m.group(1)
        for info in elfs.values()
        for need in info.needed
        if (m := _CUDART.fullmatch(need))
    }
    for value in declared:
        major = value.split(".")[0]
        if majors and major not in majors:
            f.violation(
                "variant-runtime",
                None,
                f"declares {variant.namespace} :: {variant.toolkit} :: {value}, but its ELF "
                f"files need libcudart.so.{', libcudart.so.'.join(sorted(majors))}",
            )
