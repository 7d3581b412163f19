"""The CycloneDX SBOM of a stack: valid against CycloneDX's schema, every pin named, no time
but the epoch, no build path, the same bytes for the same inputs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from builder.core.layout import Layout
from builder.manifest.model import GitSource
from builder.pipeline import sbom
from builder.plan import Plan
from tests import planning
from wheels.naming import wheel_name

pytest.importorskip("cyclonedx.validation.json")

HOME = Path("/srv/builds/infini-home")


def plan_for(vendor: str) -> Plan:
    """The real stack's plan, its toolkit and NCCL found, in a home the SBOM must not name."""
    facts = replace(
        planning.host(planning.CUDA if vendor == "nvidia" else None),
        providers={"nccl": "2.27.3@/usr/lib/x86_64-linux-gnu/libnccl.so.2"},
    )
    return planning.plan_for(
        vendor, facts=facts, layout=Layout(home=HOME, store_root=HOME / "store")
    )


def inputs(plan: Plan, **overrides: Any) -> sbom.SbomInputs:
    spec = plan.stack.wheel
    assert spec is not None
    values: dict[str, Any] = {
        "plan": plan,
        "wheel": wheel_name(spec.name, spec.version, "cu130"),
        "files": {
            "infinicore/lib/libinfinirt.so": "ab" * 32,
            "infinicore/_infinicore.cpython-311-x86_64-linux-gnu.so": "cd" * 32,
        },
        "owners": {
            "infinicore/lib/libinfinirt.so": "infinirt",
            "infinicore/_infinicore.cpython-311-x86_64-linux-gnu.so": "infinilm",
        },
        "requires": ["numpy", "torch>=2.4", "nvidia-cuda-runtime"],
        "epoch": 1_700_000_000,
    }
    values.update(overrides)
    return sbom.SbomInputs(**values)


def components(document: str) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in json.loads(document)["components"]}


def test_sbom_validates_against_the_cyclonedx_1_6_schema() -> None:
    document = sbom.render(inputs(plan_for("nvidia")))
    assert sbom.validate(document) == []
    assert json.loads(document)["specVersion"] == "1.6"


def test_validation_reports_a_broken_document() -> None:
    broken = json.loads(sbom.render(inputs(plan_for("cpu"))))
    broken["components"][0]["type"] = "spaceship"
    assert sbom.validate(json.dumps(broken))


def test_every_git_component_is_named_with_its_repository_and_pinned_sha() -> None:
    plan = plan_for("nvidia")
    found = components(sbom.render(inputs(plan)))
    for c in plan.components:
        assert isinstance(c.source, GitSource)
        entry = found[f"component:{c.name}"]
        assert entry["version"] == c.source.rev
        assert {"alg": "SHA-1", "content": c.source.rev} in entry["hashes"]
        assert entry["externalReferences"] == [{"type": "vcs", "url": c.source.url}]
        assert c.source.rev in entry["purl"]
    # nvidia pins its own InfiniOps revision: the SBOM names the one actually used.
    assert found["component:infiniops"]["version"] == plan.get("infiniops").source.rev  # type: ignore[union-attr]


def test_bundled_files_carry_their_sha256_and_the_component_that_built_them() -> None:
    found = components(sbom.render(inputs(plan_for("nvidia"))))
    lib = found["file:infinicore/lib/libinfinirt.so"]
    assert lib["hashes"] == [{"alg": "SHA-256", "content": "ab" * 32}]
    assert {"name": "infini-stack:built-by", "value": "infinirt"} in lib["properties"]


def test_toolkit_providers_and_python_dependencies_are_listed() -> None:
    found = components(sbom.render(inputs(plan_for("nvidia"))))
    assert found["tool:nvidia-toolkit"]["version"] == "13.0"
    assert found["tool:nccl"]["version"] == "2.27.3"
    assert found["tool:c++"]["version"] == "g++ 12.2.0"
    assert all(found[f"tool:{n}"]["scope"] == "excluded" for n in ("nvidia-toolkit", "nccl"))
    assert found["pypi:torch"]["purl"] == "pkg:pypi/torch"
    assert {"name": "infini-stack:specifier", "value": ">=2.4"} in found["pypi:torch"]["properties"]
    assert "pypi:nvidia-cuda-runtime" in found


def test_dependencies_link_the_wheel_to_components_and_components_to_theirs() -> None:
    data = json.loads(sbom.render(inputs(plan_for("nvidia"))))
    deps = {d["ref"]: set(d.get("dependsOn", [])) for d in data["dependencies"]}
    assert "component:infinilm" in deps["wheel"] and "pypi:numpy" in deps["wheel"]
    assert "component:infinirt" in deps["component:infiniops"]
    assert deps["file:infinicore/lib/libinfinirt.so"] == {"component:infinirt"}


def test_same_inputs_give_the_same_bytes_and_only_the_epoch_as_time() -> None:
    plan = plan_for("nvidia")
    first, second = sbom.render(inputs(plan)), sbom.render(inputs(plan))
    assert first == second
    data = json.loads(first)
    assert data["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    assert data["serialNumber"].startswith("urn:uuid:")
    other = sbom.render(inputs(plan, files={"infinicore/lib/libinfinirt.so": "ef" * 32}))
    assert json.loads(other)["serialNumber"] != data["serialNumber"]


def test_no_build_path_appears_in_the_document() -> None:
    document = sbom.render(inputs(plan_for("nvidia")))
    assert str(HOME) not in document
    assert "/store/" not in document
    assert "/opt/cuda" not in document  # the toolkit's version, not where it lives
