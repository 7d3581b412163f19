"""A CycloneDX SBOM of the stack as built: what went into a vendor's wheel, and from where.

The document names each component with its repository URL and pinned commit (a path source: the
hash of its contents), the vendor toolkit, providers and compiler the host built it with, every
ELF file the wheel carries with its SHA-256, and the Python distributions the wheel requires.
It carries no time but the wheel's epoch and no build paths, and its serial number is derived
from its contents, so the same inputs give the same bytes. The wheel carries it in
``.dist-info/sboms/`` (PEP 770).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builder import __version__
from builder.core.errors import StackError
from builder.core.redact import strip_userinfo
from builder.manifest.model import Contract, GitSource, WorktreeSource
from builder.plan import ComponentPlan, Plan
from wheels.assemble import WheelInputs, read_dynamic
from wheels.naming import WheelName

SBOM_PATH = "sboms/infini-stack.cdx.json"  # relative to the wheel's .dist-info
PROPERTY = "infini-stack"
INSTALL_HINT = (
    "pip install 'cyclonedx-python-lib[json-validation]' (a dependency of infini-stack: "
    "reinstall it with pip install infini-stack)"
)


@dataclass(frozen=True, kw_only=True)
class SbomInputs:
    plan: Plan
    wheel: WheelName | None
    files: Mapping[str, str]  # path inside the wheel -> sha256 hex
    owners: Mapping[str, str]  # path inside the wheel -> the component it came from
    requires: Sequence[str]  # Requires-Dist
    epoch: int


def available() -> bool:
    """cyclonedx-python-lib, with what its JSON schema validation needs (the extra
    ``json-validation``: without it, validation raises MissingOptionalDependencyException)."""
    try:
        import cyclonedx.output.json  # noqa: F401
        import jsonschema  # noqa: F401
        import referencing  # noqa: F401
    except ImportError:
        return False
    return True


def require() -> None:
    if not available():
        raise StackError("writing an SBOM needs cyclonedx-python-lib", hint=INSTALL_HINT)


# --- what the wheel carries ---------------------------------------------------------------------


def staged_files(root: Path, plan: Plan) -> tuple[dict[str, str], dict[str, str]]:
    """Every ELF file under a staged wheel tree: its SHA-256, and which component built it."""
    spec = plan.stack.wheel
    default_owner = spec.component if spec else ""
    by_name: dict[str, str] = {}
    for name in spec.bundle if spec else ():
        libdir = plan.get(name).prefix / "lib"
        for lib in sorted(libdir.glob("*.so*")) if libdir.is_dir() else []:
            info = read_dynamic(lib.resolve())
            by_name.setdefault(lib.name, name)
            if info is not None and info.soname:
                by_name.setdefault(info.soname, name)
    files: dict[str, str] = {}
    owners: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and read_dynamic(path) is not None:
            arcname = path.relative_to(root).as_posix()
            files[arcname] = hashlib.sha256(path.read_bytes()).hexdigest()
            owners[arcname] = by_name.get(path.name, default_owner)
    return files, owners


# --- the document -------------------------------------------------------------------------------


def document(plan: Plan, wheel: WheelInputs, root: Path, requires: Sequence[str]) -> str:
    """The SBOM of the wheel staged under ``root`` (``requires``: the Requires-Dist staging
    added to the wheel spec's own)."""
    files, owners = staged_files(root, plan)
    return render(
        SbomInputs(
            plan=plan,
            wheel=wheel.name,
            files=files,
            owners=owners,
            requires=[*wheel.spec.requires, *requires],
            epoch=wheel.epoch,
        )
    )


def render(inputs: SbomInputs) -> str:
    """The CycloneDX 1.6 JSON document."""
    require()
    from cyclonedx.output.json import JsonV1Dot6

    text: str = JsonV1Dot6(make_bom(inputs)).output_as_string(indent=2)
    return text + "\n"


def make_bom(inputs: SbomInputs) -> Any:
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.dependency import Dependency

    plan = inputs.plan
    stack_components = [_stack_component(c) for c in plan.components]
    files = [_file_component(a, h, inputs.owners.get(a, "")) for a, h in inputs.files.items()]
    tools = _build_tools(plan)
    python_deps = [_python_component(r) for r in dict.fromkeys(inputs.requires)]
    root = Component(
        name=plan.stack.wheel.name if plan.stack.wheel else plan.stack.file.parent.name,
        version=inputs.wheel.version if inputs.wheel else None,
        type=ComponentType.LIBRARY,
        bom_ref="wheel",
        purl=_pypi_purl(inputs.wheel) if inputs.wheel else None,
        description=(plan.stack.wheel.summary or None) if plan.stack.wheel else None,
        properties=_properties(
            {
                "vendor": plan.vendor,
                "python": plan.host.python_version,
                "soabi": plan.host.soabi,
                "wheel-tag": inputs.wheel.tag if inputs.wheel else "",
            }
        ),
    )
    by_name = {c.name: s for c, s in zip(plan.components, stack_components, strict=True)}
    dependencies = [
        Dependency(
            ref=root.bom_ref,
            dependencies=[Dependency(ref=c.bom_ref) for c in [*stack_components, *python_deps]],
        ),
        *(
            Dependency(
                ref=by_name[c.name].bom_ref,
                dependencies=[Dependency(ref=by_name[d].bom_ref) for d in c.depends],
            )
            for c in plan.components
        ),
        *(
            Dependency(
                ref=f.bom_ref,
                dependencies=[Dependency(ref=by_name[o].bom_ref)]
                if (o := inputs.owners.get(f.name, "")) in by_name
                else [],
            )
            for f in files
        ),
    ]
    contract = [_contract_component(plan.stack.contract)] if plan.stack.contract else []
    metadata = BomMetaData(
        component=root,
        timestamp=datetime.fromtimestamp(inputs.epoch, tz=timezone.utc),
        properties=_properties({"generator": f"infini-stack {__version__}"}),
    )
    components = [*stack_components, *contract, *files, *tools, *python_deps]
    bom = Bom(components=components, metadata=metadata, dependencies=dependencies)
    bom.serial_number = _serial(inputs)
    return bom


def _stack_component(c: ComponentPlan) -> Any:
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        XsUri,
    )
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    source = c.source
    props = {"component": c.name, "build-key": c.key}
    if isinstance(source, GitSource):
        props["source"] = "git"
        return Component(
            name=c.name,
            version=source.rev,
            type=ComponentType.LIBRARY,
            bom_ref=f"component:{c.name}",
            hashes=[HashType(alg=HashAlgorithm.SHA_1, content=source.rev)],
            purl=PackageURL(
                type="generic",
                name=c.name,
                version=source.rev,
                qualifiers={"vcs_url": f"git+{strip_userinfo(source.url)}@{source.rev}"},
            ),
            external_references=[
                ExternalReference(
                    type=ExternalReferenceType.VCS, url=XsUri(strip_userinfo(source.url))
                )
            ],
            properties=_properties(props),
            pedigree=_pedigree(c),
        )
    digest = c.source_id.removeprefix("path:")
    props["source"] = "path"
    if isinstance(source, WorktreeSource):  # --worktree: HEAD and the hash of its changes
        props.update(source="worktree", head=source.head, diff=source.diff or "clean")
        digest = hashlib.sha256(source.identity.encode()).hexdigest()
    return Component(
        name=c.name,
        version=f"sha256:{digest}",
        type=ComponentType.LIBRARY,
        bom_ref=f"component:{c.name}",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest)],
        purl=PackageURL(type="generic", name=c.name, version=f"sha256:{digest}"),
        properties=_properties(props),
    )


def _contract_component(contract: Contract) -> Any:
    """The superproject whose gitlinks the pins follow (InfiniCore): pinned, never built."""
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    url = strip_userinfo(contract.url)
    return Component(
        name=contract.name,
        version=contract.rev,
        type=ComponentType.LIBRARY,
        bom_ref=f"contract:{contract.name}",
        hashes=[HashType(alg=HashAlgorithm.SHA_1, content=contract.rev)],
        purl=PackageURL(
            type="generic",
            name=contract.name,
            version=contract.rev,
            qualifiers={"vcs_url": f"git+{url}@{contract.rev}"},
        ),
        properties=_properties({"role": "contract", "built": "false", "source": "git"}),
    )


def _pedigree(c: ComponentPlan) -> Any:
    """The recipe's patches, applied on top of the pinned commit (CycloneDX pedigree)."""
    if not c.patches:
        return None
    from cyclonedx.model import AttachedText
    from cyclonedx.model.component import Diff, Patch, PatchClassification, Pedigree

    return Pedigree(
        patches=[
            Patch(
                type=PatchClassification.UNOFFICIAL,
                diff=Diff(text=AttachedText(content=p.path.read_text(encoding="utf-8"))),
            )
            for p in c.patches
        ],
        notes="patches applied in order: "
        + ", ".join(f"{p.name} (sha256 {p.sha256})" for p in c.patches),
    )


def _file_component(arcname: str, sha256: str, owner: str) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType

    return Component(
        name=arcname,
        type=ComponentType.FILE,
        bom_ref=f"file:{arcname}",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256)],
        properties=_properties({"built-by": owner} if owner else {}),
    )


def _build_tools(plan: Plan) -> list[Any]:
    """The vendor toolkit, preflight's providers, compiler, Python and pybind11 (not shipped)."""
    from cyclonedx.model.component import Component, ComponentScope, ComponentType

    host = plan.host
    found: dict[str, tuple[str | None, str]] = {}
    if host.toolkit is not None and host.toolkit.found:
        found[f"{plan.vendor}-toolkit"] = (host.toolkit.version, "toolkit")
    for name, fingerprint in sorted(host.providers.items()):
        found.setdefault(name, (fingerprint.partition("@")[0] or None, "provider"))
    if host.cxx_version:
        found["c++"] = (host.cxx_version, "compiler")
    found["python"] = (host.python_version, "interpreter")
    if host.pybind11_version:
        found["pybind11"] = (host.pybind11_version, "build dependency")
    return [
        Component(
            name=name,
            version=version,
            type=ComponentType.APPLICATION,
            scope=ComponentScope.EXCLUDED,
            bom_ref=f"tool:{name}",
            properties=_properties({"role": role}),
        )
        for name, (version, role) in found.items()
    ]


def _python_component(requirement: str) -> Any:
    from cyclonedx.model.component import Component, ComponentScope, ComponentType
    from packageurl import PackageURL

    try:
        req = Requirement(requirement)
        name, spec = canonicalize_name(req.name), str(req.specifier)
    except InvalidRequirement:
        name, spec = canonicalize_name(requirement), ""
    return Component(
        name=name,
        type=ComponentType.LIBRARY,
        scope=ComponentScope.REQUIRED,
        bom_ref=f"pypi:{name}",
        purl=PackageURL(type="pypi", name=name),
        properties=_properties({"requirement": requirement, "specifier": spec}),
    )


def _pypi_purl(name: WheelName) -> Any:
    from packageurl import PackageURL

    return PackageURL(type="pypi", name=canonicalize_name(name.distribution), version=name.version)


def _properties(values: Mapping[str, str]) -> list[Any]:
    from cyclonedx.model import Property

    return [Property(name=f"{PROPERTY}:{k}", value=v) for k, v in values.items() if v]


def _serial(inputs: SbomInputs) -> uuid.UUID:
    plan = inputs.plan
    blob = json.dumps(
        {
            "wheel": inputs.wheel.filename if inputs.wheel else None,
            "vendor": plan.vendor,
            "sources": {c.name: c.source_id for c in plan.components},
            "files": dict(inputs.files),
            "requires": list(inputs.requires),
        },
        sort_keys=True,
    )
    return uuid.uuid5(
        uuid.NAMESPACE_URL, "urn:infini-stack:" + hashlib.sha256(blob.encode()).hexdigest()
    )


# --- checks -------------------------------------------------------------------------------------


def validate(text: str) -> list[str]:
    """Problems found by CycloneDX's own JSON schema (empty when valid)."""
    from cyclonedx.exception import MissingOptionalDependencyException
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    try:
        error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    except MissingOptionalDependencyException as exc:
        raise StackError(
            f"validating the SBOM needs more than is installed: {exc}", hint=INSTALL_HINT
        ) from exc
    return [] if error is None else [str(getattr(error, "data", error)).splitlines()[0]]


def component_versions(text: str) -> dict[str, str]:
    """``{component: version}`` of the stack components an SBOM names (its pins and hashes)."""
    data = json.loads(text)
    return {
        c["name"]: c.get("version", "")
        for c in data.get("components", [])
        if str(c.get("bom-ref", "")).startswith("component:")
    }
