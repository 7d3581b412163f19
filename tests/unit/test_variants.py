"""PEP 825 variant metadata as wheels/variants.py writes it, held to variantlib (the PEP's
reference implementation), and the variant label scheme of wheels/naming.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from variantlib.errors import ValidationError
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from builder.core.errors import StackError
from wheels import variants
from wheels.cuda.fatbin import DeviceCode
from wheels.naming import (
    index_file_name,
    split_variant,
    variant_label,
    variant_name,
    vendor_of_variant,
)
from wheels.policy import _parse, load_vendor_policy

STACK = ("cpu", "nvidia", "moore", "thead")
NVIDIA = {"nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["75_real", "90_real"]}}


def doc(label: str, props: variants.Properties) -> dict[str, Any]:
    namespaces, providers = variants.stack_metadata(STACK)
    return variants.document(label, props, namespaces, providers)


def test_the_label_is_the_vendors_local_version_and_null_without_properties() -> None:
    assert variant_label("cu130", has_properties=True) == "cu130"
    assert variant_label("MUSA43", has_properties=True) == "musa43"
    assert variant_label("cpu", has_properties=False) == "null"
    name = variant_name("Infini.Mini", "0.1.0", "cu130", has_properties=True)
    assert name.version == "0.1.0"  # the public version: the wheels are variants of one version
    assert name.filename.endswith("-cu130.whl")
    assert name.dist_info == "infini_mini-0.1.0.dist-info"
    assert vendor_of_variant("cu130") == "nvidia"
    assert vendor_of_variant("null") == "cpu"
    assert vendor_of_variant("ppu12") == "thead"


def test_a_variant_label_is_told_from_a_build_tag_as_pep_825_says() -> None:
    base = "x-1.0-cp311-cp311-linux_x86_64.whl"
    assert split_variant("x-1.0-cp311-cp311-linux_x86_64-cu130.whl") == (base, "cu130")
    assert split_variant("x-1.0-1-cp311-cp311-linux_x86_64.whl") == (
        "x-1.0-1-cp311-cp311-linux_x86_64.whl",
        None,
    )
    assert split_variant("x-1.0-1-cp311-cp311-linux_x86_64-null.whl")[1] == "null"
    assert split_variant(base) == (base, None)


def test_the_index_file_name_is_normalised_like_wheel_names() -> None:
    assert index_file_name("Infini.Mini", "0.1") == "infini_mini-0.1-variants.json"


def test_a_wheels_variant_json_is_valid_for_variantlib_with_exactly_its_label() -> None:
    written = variants.dumps(doc("cu130", NVIDIA))
    info = VariantDistInfo(written, expected_label="cu130")
    assert {p.to_str() for p in info.variant_desc.properties} == {
        "nvidia :: cuda_version_lower_bound :: 13.0",
        "nvidia :: sm_arch :: 75_real",
        "nvidia :: sm_arch :: 90_real",
    }
    assert info.namespace_priorities == ["nvidia", "mthreads", "thead"]
    with pytest.raises(ValidationError):
        VariantDistInfo(written, expected_label="cu129")


def test_the_null_variant_has_no_properties_and_is_valid_for_variantlib() -> None:
    info = VariantDistInfo(variants.dumps(doc("null", {})), expected_label="null")
    assert info.variant_desc.is_null_variant()
    with pytest.raises(variants.VariantError, match="null"):
        doc("null", NVIDIA)
    with pytest.raises(variants.VariantError, match="null"):
        doc("cu130", {})


def test_the_index_file_combines_the_wheels_as_variantlib_does() -> None:
    combined = variants.combine([doc("cu130", NVIDIA), doc("null", {})])
    assert set(VariantsJson(combined).variants) == {"cu130", "null"}
    assert variants.problems_of(combined) == []


def test_one_label_with_two_meanings_does_not_combine() -> None:
    other = {"nvidia": {"cuda_version_lower_bound": ["12.8"]}}
    with pytest.raises(variants.VariantError, match=r"variants\.cu130"):
        variants.combine([doc("cu130", NVIDIA), doc("cu130", other)])


def test_namespace_lists_combine_when_one_extends_the_other_and_not_otherwise() -> None:
    first, second = doc("cu130", NVIDIA), doc("null", {})
    second["default-priorities"]["namespace"] = ["nvidia"]
    assert variants.combine([first, second])["default-priorities"]["namespace"] == [
        "nvidia",
        "mthreads",
        "thead",
    ]
    second["default-priorities"]["namespace"] = ["thead"]
    with pytest.raises(variants.VariantError, match="disagree"):
        variants.combine([first, second])


def test_problems_name_what_pep_825_forbids() -> None:
    bad = doc("cu130", NVIDIA)
    bad["variants"]["cu130"]["nvidia"]["sm_arch"] = ["90_real", "75_real"]  # not sorted
    bad["variants"]["Bad-Label"] = {"nvidia": {"sm_arch": ["90_real"]}}
    problems = variants.problems_of(bad, "cu130")
    assert any("sorted" in p for p in problems)
    assert any("Bad-Label" in p for p in problems)
    assert any("exactly the label 'cu130'" in p for p in problems)


def test_properties_come_from_the_toolkit_and_the_device_code_found() -> None:
    policy = load_vendor_policy("nvidia").variant
    props = variants.properties_of(
        policy, toolkit_version="13.0.88", architectures=("80",), device_code={"x.so": DeviceCode()}
    )
    # No SASS or PTX was found: no sm_arch, whatever stack.yaml wished for.
    assert props == {"nvidia": {"cuda_version_lower_bound": ["13.0"]}}
    assert variants.properties_of(None, toolkit_version="1", architectures=(), device_code={}) == {}


def test_the_thead_architectures_are_those_its_compiler_was_given() -> None:
    policy = load_vendor_policy("thead").variant
    props = variants.properties_of(
        policy, toolkit_version="1.2", architectures=("80",), device_code={}
    )
    assert props == {"thead": {"ppu_arch": ["80"], "ppu_sdk_version_lower_bound": ["1.2"]}}


def test_a_value_the_static_provider_does_not_list_is_refused() -> None:
    policy = load_vendor_policy("moore").variant
    with pytest.raises(variants.VariantError, match="would ever select"):
        variants.properties_of(policy, toolkit_version="9.9", architectures=(), device_code={})


def test_bad_variant_data_in_vendors_json_is_reported() -> None:
    data = json.loads(json.dumps({"nvidia": {"variant": {"namespace": "Bad", "toolkit": "t"}}}))
    with pytest.raises(StackError, match=r"nvidia\.variant"):
        _parse(json.dumps(data))
    provider = {"requires": ["x"], "static-properties": {"f": ["1"]}}
    entry = {"namespace": "n", "toolkit": "t", "arch": "a", "provider": provider}
    with pytest.raises(StackError, match="exactly one of"):
        _parse(json.dumps({"nvidia": {"variant": entry}}))
