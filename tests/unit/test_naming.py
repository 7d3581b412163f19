"""Wheel names: one authority for distribution, local version per vendor, and tags."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import InvalidVersion

from builder.core.host import HostFacts, Toolkit
from builder.vendors import get
from builder.vendors.base import VendorSettings
from wheels.audit import infer_vendor
from wheels.filename import (
    InvalidWheelName,
    canonicalize_name,
    normalized_version,
    parse_wheel_filename,
    same_version,
)
from wheels.naming import WheelName, vendor_of_local, wheel_name, with_local


def facts(version: str | None) -> HostFacts:
    tk = (
        Toolkit(
            root=Path("/t"),
            compiler=Path("/t/bin/nvcc"),
            version=version,
            found=True,
            source="test",
        )
        if version
        else None
    )
    return HostFacts(
        python="py", python_version="3.11", soabi="", pybind11_dir=None, cpu_count=1, toolkit=tk
    )


@pytest.mark.parametrize(
    ("vendor", "toolkit", "local"),
    [
        ("cpu", None, "cpu"),
        ("nvidia", "13.0", "cu130"),
        ("nvidia", "12.4", "cu124"),
        ("moore", "4.1.0", "musa41"),
        ("thead", "1.5", "ppu15"),
        ("nvidia", None, "cuda"),
    ],
)
def test_local_version_per_vendor_comes_from_its_toolkit(
    vendor: str, toolkit: str | None, local: str
) -> None:
    assert get(vendor).local_version(facts(toolkit), VendorSettings()) == local


def test_manifest_local_version_overrides_the_vendors() -> None:
    settings = VendorSettings(local_version="cu13")
    assert get("nvidia").local_version(facts("13.0"), settings) == "cu13"


def test_filename_normalises_the_distribution_and_keeps_the_local_version() -> None:
    name = WheelName(
        distribution="InfiniLM",
        version="0.1.0+cu130",
        python_tag="cp311",
        abi_tag="cp311",
        platform_tag="linux_x86_64",
    )
    assert name.filename == "infinilm-0.1.0+cu130-cp311-cp311-linux_x86_64.whl"
    assert name.dist_info == "infinilm-0.1.0+cu130.dist-info"
    dashed = WheelName(
        distribution="infini-mini",
        version="1.0",
        python_tag="cp311",
        abi_tag="cp311",
        platform_tag="linux_x86_64",
    )
    assert dashed.filename.startswith("infini_mini-1.0-")


def test_with_local_validates_and_normalises() -> None:
    assert with_local("0.1", "CU130") == "0.1+cu130"
    assert with_local("0.1.0", "") == "0.1.0"


def test_wheel_name_uses_this_interpreters_tags() -> None:
    name = wheel_name("x", "1.0", "cpu")
    assert name.python_tag.startswith("cp3") and name.abi_tag == name.python_tag
    assert name.version == "1.0+cpu"


@pytest.mark.parametrize(
    ("version", "vendor"),
    [
        ("0.1+cpu", "cpu"),
        ("0.1+cu130", "nvidia"),
        ("0.1+CUDA", "nvidia"),
        ("0.1+musa41", "moore"),
        ("0.1+ppu15", "thead"),
        ("0.1", None),
        ("0.1+weird", None),
        ("0.1+cufoo", None),  # cu must be followed by the CUDA version
    ],
)
def test_vendor_is_read_back_from_the_local_version(version: str, vendor: str | None) -> None:
    assert vendor_of_local(version) == vendor


def test_vendor_is_inferred_from_the_wheel_file_name() -> None:
    assert infer_vendor(Path("x-1.0+cu130-cp311-cp311-linux_x86_64.whl")) == "nvidia"
    assert infer_vendor(Path("x-1.0-cp311-cp311-linux_x86_64.whl")) == "cpu"
    assert infer_vendor(Path("not a wheel.zip")) == "cpu"
    assert infer_vendor(Path("x-1.0+weird-cp311-cp311-linux_x86_64.whl")) == "cpu"
    assert infer_vendor(Path("x-1.0+cuda-cp311-cp311-linux_x86_64.whl")) == "nvidia"


# --- the file-name reader mirrors packaging.utils ---------------------------------------------

WHEEL_FILE_NAMES = [
    "foo-1.0-py3-none-any.whl",
    "My_Pkg-2.0.post1-1build-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    "psutil-5.9.5-cp36-abi3-manylinux_2_12_x86_64.manylinux2010_x86_64.whl",
    "ninja-1.10.2.3-py2.py3-none-manylinux_2_5_x86_64.manylinux1_x86_64.whl",
    "Foo-1.0-CP311-ABI3-Linux_X86_64.whl",
    "foo-1.0-py3-none-any.zip",
    "foo-1.0-py3-any.whl",
    "foo-1.0-1-2-py3-none-any.whl",
    "foo__bar-1.0-py3-none-any.whl",
    "foo-bar-1.0-py3-none-any.whl",
    "-1.0-py3-none-any.whl",
    "foo-1.0-x-py3-none-any.whl",
    "foo-not.a.version-py3-none-any.whl",
    "foo-1.0-py3..py2-none-any.whl",
    "foo-1.0-3py-none-any.whl",
    "foo-1.0-py3-none-.whl",
]


def packaging_says(name: str) -> object:
    from packaging.utils import InvalidWheelFilename
    from packaging.utils import parse_wheel_filename as theirs

    try:
        dist, version, build, tags = theirs(name)
    except InvalidWheelFilename:
        return "invalid"
    triples = {(t.interpreter, t.abi, t.platform) for t in tags}
    return str(dist), str(version), tuple(build) or None, triples


def we_say(name: str) -> object:
    try:
        return parse_wheel_filename(name)
    except InvalidWheelName:
        return "invalid"


@pytest.mark.parametrize("name", WHEEL_FILE_NAMES)
def test_wheel_file_names_are_read_as_packaging_reads_them(name: str) -> None:
    assert we_say(name) == packaging_says(name)


@given(st.text(alphabet="ab_.-+1!pyc3nox", min_size=0, max_size=30))
def test_any_text_as_a_wheel_file_name_is_read_as_packaging_reads_it(stem: str) -> None:
    assert we_say(stem + ".whl") == packaging_says(stem + ".whl")


VERSION_PARTS = [
    "0",
    "1",
    "00",
    "01",
    "10",
    "2",
    ".",
    "+",
    "-",
    "_",
    "a",
    "B",
    "cpu",
    "cu130",
    "rc",
    "post",
    "dev",
    "!",
    "v",
    " ",
]


@st.composite
def versions(draw: st.DrawFn) -> str:
    """Version-like text: half of it release numbers with an optional local label, as nearly
    every wheel has them (trailing zeros, leading zeros, upper case among them), the rest
    packaging's other forms (pre, post, dev, epochs) and junk, from the same parts."""
    if draw(st.booleans()):
        segment = st.sampled_from(["0", "1", "2", "10", "00", "01"])
        release = ".".join(draw(st.lists(segment, min_size=1, max_size=4)))
        labels = st.lists(
            st.sampled_from(["cpu", "CPU", "cu130", "0", "01", "7", "0a"]), max_size=2
        )
        local = ".".join(draw(labels))
        return f"{release}+{local}" if local else release
    return "".join(draw(st.lists(st.sampled_from(VERSION_PARTS), max_size=8)))


@settings(max_examples=2000)
@given(versions())
def test_versions_are_normalized_as_packaging_normalizes_them(text: str) -> None:
    from packaging.version import Version

    try:
        theirs: object = str(Version(text))
    except InvalidVersion:
        theirs = "invalid"
    try:
        ours: object = normalized_version(text)
    except InvalidVersion:
        ours = "invalid"
    assert ours == theirs


@settings(max_examples=2000)
@given(versions(), versions())
def test_versions_are_compared_as_packaging_compares_them(a: str, b: str) -> None:
    from packaging.version import Version

    try:
        theirs = Version(a) == Version(b)
    except InvalidVersion:
        theirs = False
    assert same_version(a, b) == theirs


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("1.0", "1", True),
        ("1.0.0+cpu", "1+cpu", True),
        ("0", "0.0", True),
        ("1.10", "1.1", False),
        ("1.0+cpu", "1.0", False),
        ("1.0+CPU", "1.0+cpu", True),
        ("01.2", "1.2", True),
        ("2.0", "2.0.1", False),
    ],
)
def test_common_versions_compare_as_they_should(a: str, b: str, same: bool) -> None:
    assert same_version(a, b) is same


@given(st.text(alphabet="aB_.-9-x", max_size=20))
def test_names_are_canonicalized_as_packaging_canonicalizes_them(name: str) -> None:
    from packaging.utils import canonicalize_name as theirs

    assert canonicalize_name(name) == theirs(name)


def test_check_takes_the_vendor_from_a_variant_label_or_the_local_version() -> None:
    from builder.core.errors import UsageError
    from builder.pipeline.check import wheel_vendor

    assert wheel_vendor(Path("x-0.1.0-cp312-cp312-linux_x86_64-cu130.whl"), None) == "nvidia"
    assert wheel_vendor(Path("x-0.1.0+cu130-cp312-cp312-linux_x86_64.whl"), None) == "nvidia"
    assert wheel_vendor(Path("x-0.1.0-cp312-cp312-linux_x86_64-null.whl"), None) == "cpu"
    assert wheel_vendor(Path("x-0.1.0-py3-none-any.whl"), "ali") == "thead"
    with pytest.raises(UsageError, match="names no vendor"):
        wheel_vendor(Path("x-0.1.0-py3-none-any.whl"), None)
