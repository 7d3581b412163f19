"""The wheel's .dist-info texts: METADATA (its Requires-Dist with ABI partners pinned) and WHEEL."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from packaging.requirements import Requirement

from wheels.audit.abi_partners import abi_range
from wheels.filename import canonicalize_name

if TYPE_CHECKING:
    from wheels.naming import WheelName
    from wheels.spec import WheelSpec


class WheelInputs(Protocol):
    """What METADATA is written from (wheels.assemble.WheelInputs has it)."""

    @property
    def spec(self) -> WheelSpec: ...
    @property
    def name(self) -> WheelName: ...
    @property
    def partners(self) -> Mapping[str, str]: ...


def metadata(inputs: WheelInputs, requires: Iterable[str]) -> str:
    spec = inputs.spec
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {spec.name}",
        f"Version: {inputs.name.version}",
    ]
    if spec.summary:
        lines.append(f"Summary: {spec.summary}")
    lines.append(f"Requires-Python: {spec.requires_python}")
    wanted = dict.fromkeys([*spec.requires, *requires])
    lines += [f"Requires-Dist: {r}" for r in pinned(wanted, inputs.partners)]
    return "\n".join(lines) + "\n"


def pinned(requires: Iterable[str], partners: Mapping[str, str]) -> list[str]:
    """``requires`` with each ABI partner's line narrowed to the ABI built against
    (``torch`` -> ``torch>=2.11,<2.12``), its marker kept; a partner named twice once."""

    versions = {canonicalize_name(d): v for d, v in partners.items()}
    out: list[str] = []
    for text in requires:
        req = Requirement(text)
        version = versions.get(canonicalize_name(req.name))
        if version is not None:
            specs = ",".join(s for s in (str(req.specifier), abi_range(req.name, version)) if s)
            marker = f"; {req.marker}" if req.marker else ""
            out.append(f"{req.name}{specs}{marker}")
        else:
            out.append(text)
    return list(dict.fromkeys(out))


def wheel_file(name: WheelName, generator: str = "infini-stack") -> str:
    """The WHEEL file; a compressed tag set (``manylinux_2_17_x86_64.manylinux2014_x86_64``)
    gets one ``Tag:`` line per tag."""
    tags = [
        f"Tag: {py}-{abi}-{plat}"
        for py in name.python_tag.split(".")
        for abi in name.abi_tag.split(".")
        for plat in name.platform_tag.split(".")
    ]
    return f"Wheel-Version: 1.0\nGenerator: {generator}\nRoot-Is-Purelib: false\n" + "".join(
        f"{tag}\n" for tag in tags
    )
