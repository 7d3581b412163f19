"""wheels.policy: the vendor policy data, the platform-tag verdict's ordering and the C-API
names (the classification rules the audit takes from it)."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.core.errors import StackError, UsageError
from wheels.loading import loaded_by_import
from wheels.policy import (
    TagVerdict,
    _parse,
    _vendor_from,
    is_python_api,
    load_vendor_policy,
    manylinux_policies,
    vendor_names,
    vendor_of_local,
)
from wheels.policy.lddtree import _dirname, host_search
from wheels.policy.manylinux import ARCHITECTURES, baseline, is_superset
from wheels.policy.wheel_abi import glibc_needed, pep600

KEYS = {"distribution", "dir", "import", "after"}


def test_vendors_json_has_exactly_the_four_vendors_in_the_agreed_format() -> None:
    raw = json.loads(resources.files("wheels").joinpath("policy/vendors.json").read_text())
    assert list(raw) == list(vendor_names()) == ["cpu", "nvidia", "moore", "thead"]
    for vendor, entry in raw.items():
        keys = {"aliases", "local", "external", "distributions"}
        assert keys <= set(entry) <= {*keys, "variant"}, vendor
        # Every accelerator vendor has its PEP 825 namespace; cpu's wheel is the null variant.
        assert ("variant" in entry) == (vendor != "cpu"), vendor
        assert all(isinstance(p, str) for p in entry["external"])
        for soname, lib in entry["distributions"].items():
            assert {"distribution", "dir"} <= set(lib) <= KEYS, soname


def test_libtorch_python_may_only_be_loaded_by_importing_torch() -> None:
    for vendor in ("cpu", "nvidia"):
        lib = load_vendor_policy(vendor).supplier("libtorch_python.so")
        assert lib is not None and lib.module == "torch", vendor
        libtorch = load_vendor_policy(vendor).supplier("libtorch.so")
        assert libtorch is not None and libtorch.module is None, vendor


def test_flash_attn_is_loaded_by_its_own_import_after_torch() -> None:
    policy = load_vendor_policy("nvidia")
    flash = {s: lib for s, lib in policy.distributions.items() if s.startswith("flash_attn_2")}
    assert len(flash) == 5
    for soname, lib in flash.items():
        assert (lib.module, lib.after) == ("flash_attn_2_cuda", ("torch",)), soname
        assert loaded_by_import(soname, lib), soname
    torch_python = policy.supplier("libtorch_python.so")
    assert torch_python is not None and not loaded_by_import("libtorch_python.so", torch_python)


def test_policy_after_needs_module_names_and_an_import() -> None:
    problems: list[str] = []
    raw = {
        "distributions": {
            "a.so": {"distribution": "a", "dir": ".", "after": ["torch"]},
            "b.so": {"distribution": "b", "dir": ".", "import": "b", "after": "torch"},
        }
    }
    _vendor_from("demo", raw, problems)
    assert problems == [
        "demo.distributions.a.so.after: only an entry with an import has imports before it",
        "demo.distributions.b.so.after: expected a list of module names",
    ]


def test_policy_entry_with_a_bad_import_or_an_unknown_key_is_a_problem() -> None:
    problems: list[str] = []
    raw = {"distributions": {"libx.so": {"distribution": "x", "dir": "x", "import": "a b"}}}
    _vendor_from("demo", raw, problems)
    raw = {"distributions": {"liby.so": {"distribution": "y", "dir": "y", "preload": "y"}}}
    _vendor_from("demo", raw, problems)
    assert problems == [
        "demo.distributions.libx.so.import: expected a module name",
        "demo.distributions.liby.so: unknown key 'preload'",
    ]


def test_broken_vendors_json_is_a_stack_error_naming_the_file_and_the_problem() -> None:
    with pytest.raises(StackError, match=r"vendors\.json: line 1: Expecting"):
        _parse("{not json")
    with pytest.raises(StackError, match=r"vendors\.json: .*cpu: missing or not an object"):
        _parse('{"cpu": 1}')


def test_nvidia_cuda13_libraries_live_where_their_wheels_install_them() -> None:
    nvidia = load_vendor_policy("nvidia")
    assert nvidia.distributions["libcudart.so.13"].distribution == "nvidia-cuda-runtime"
    assert nvidia.distributions["libcudart.so.13"].dir == "nvidia/cu13/lib"
    assert nvidia.distributions["libcublasLt.so.13"].distribution == "nvidia-cublas"
    assert nvidia.distributions["libnccl.so.2"].dir == "nvidia/nccl/lib"
    assert nvidia.is_external("libcuda.so.1") and not nvidia.is_external("libcudart.so.13")


def test_flash_attn_extension_is_supplied_from_the_top_of_site_packages() -> None:
    """InfiniOps links flash-attn's extension on NVIDIA; "." in vendors.json is the site root."""
    nvidia = load_vendor_policy("nvidia")
    lib = nvidia.supplier("flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so")
    assert lib is not None and (lib.distribution, lib.dir) == ("flash-attn", "")
    assert (
        load_vendor_policy("cpu").supplier("flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so")
        is None
    )


def test_alias_ali_loads_the_thead_policy_and_unknown_vendor_is_a_usage_error() -> None:
    from builder.vendors import canonical_name

    assert load_vendor_policy("ali").name == "thead"
    assert load_vendor_policy("NVIDIA").name == "nvidia"
    with pytest.raises(KeyError):
        load_vendor_policy("nvidai")
    with pytest.raises(UsageError, match="unknown vendor 'nvidai'"):
        canonical_name("nvidai")  # the registry's error, with a suggestion, for the CLI


def test_every_vendor_plugin_makes_local_versions_its_data_entry_recognises() -> None:
    """One vendor, two halves: the plugin names its wheels, the data entry reads them back."""
    from builder.core.host import HostFacts, Toolkit
    from builder.vendors import REGISTRY
    from builder.vendors.base import VendorSettings

    for name, plugin in REGISTRY.items():
        for version in (None, "13.0", "4.3.1"):
            toolkit = (
                Toolkit(root=Path("/x"), compiler=None, version=version, found=True, source="test")
                if version
                else None
            )
            host = HostFacts(
                python="py",
                python_version="3.11",
                soabi="",
                pybind11_dir=None,
                cpu_count=1,
                toolkit=toolkit,
            )
            local = plugin.local_version(host, VendorSettings())
            assert vendor_of_local(local) == name, (name, local)


def test_external_patterns_are_globs() -> None:
    moore = load_vendor_policy("moore")
    assert moore.is_external("libmusa.so.4") and moore.outside_wheel("libmusart.so.4.2")
    assert not moore.is_external("libmusa_extra.so")


def verdict(tag: str) -> TagVerdict:
    policies = manylinux_policies("glibc", "x86_64")
    priorities = {n: p.priority for p in policies for n in (p.name, *p.aliases)}
    return TagVerdict(tag, "glibc", "x86_64", priorities, (), ())


def test_declared_tag_may_claim_less_but_not_more_than_the_verdict() -> None:
    v = verdict("manylinux_2_28_x86_64")
    assert v.allows("manylinux_2_34_x86_64") and v.allows("linux_x86_64")
    assert v.allows("manylinux_2_28_x86_64")
    assert v.allows("manylinux2014_x86_64") is False
    assert v.allows("manylinux_2_28_aarch64") is None


@pytest.mark.parametrize(
    ("verdict_tag", "declared", "allowed"),
    [
        ("manylinux_2_24_x86_64", "manylinux_2_18_x86_64", False),  # NCCL cu13's over-claim
        ("manylinux_2_17_x86_64", "manylinux_2_18_x86_64", True),
        ("manylinux_2_5_x86_64", "manylinux_2_20_x86_64", True),
        ("linux_x86_64", "manylinux_2_18_x86_64", False),
        ("manylinux_2_17_x86_64", "musllinux_1_3_x86_64", None),
        ("manylinux_2_17_x86_64", "manylinux_2_18_aarch64", None),
    ],
)
def test_a_pep600_tag_without_an_auditwheel_policy_is_compared_by_its_glibc_version(
    verdict_tag: str, declared: str, allowed: bool | None
) -> None:
    v = verdict(verdict_tag)
    assert not v.has_policy(declared)
    assert v.allows(declared) is allowed


@pytest.mark.parametrize(
    ("symbol", "api"),
    [
        ("Py_Initialize", True),
        ("_Py_Dealloc", True),
        ("PyObject_GetAttr", True),
        ("PyExc_TypeError", True),
        ("_PyFunction_CopyWithNewCode", True),
        ("PyImaging_New", False),
        ("PyArray_Zeros", False),
        ("__Pyx_AddTraceback", False),
        ("Pybind11Thing", False),
        ("PyInitOnly", False),
    ],
)
def test_python_c_api_names_are_told_from_projects_own_py_prefixed_names(
    symbol: str, api: bool
) -> None:
    assert is_python_api(symbol) is api


# --- the mirror of auditwheel's policy module, architecture and ld paths ----------------------


def their_policies(libc: str, arch: str) -> Any:
    """auditwheel's own ``WheelPolicies`` (the test is skipped without auditwheel)."""
    policy = pytest.importorskip("auditwheel.policy")
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc

    return policy.WheelPolicies(libc=Libc(libc), arch=Architecture(arch))


@pytest.mark.parametrize("libc", ["glibc", "musl"])
@pytest.mark.parametrize(
    "arch", ["x86_64", "i686", "aarch64", "ppc64le", "s390x", "armv7l", "riscv64", "loongarch64"]
)
def test_policies_read_from_auditwheels_json_equal_auditwheels_own(libc: str, arch: str) -> None:
    try:
        theirs = list(their_policies(libc, arch))
    except (ValueError, KeyError, IndexError):
        with pytest.raises((ValueError, KeyError, IndexError)):
            manylinux_policies(libc, arch)
        return
    ours = list(manylinux_policies(libc, arch))
    assert [p.name for p in ours] == [p.name for p in theirs]
    for mine, their in zip(ours, theirs, strict=True):
        assert (mine.aliases, mine.priority, mine.whitelist) == (
            their.aliases,
            their.priority,
            their.whitelist,
        )
        assert dict(mine.symbol_versions) == their.symbol_versions
        assert dict(mine.blacklist) == their.blacklist


@pytest.mark.parametrize(
    "needs",
    [
        {},
        {"libc.so.6": {"GLIBC_2.2.5"}},
        {"libc.so.6": {"GLIBC_2.18", "GLIBC_2.3"}, "libstdc++.so.6": {"GLIBCXX_3.4.22"}},
        {"libc.so.6": {"GLIBC_2.34"}, "libgcc_s.so.1": {"GCC_4.2.0"}},
        {"libc.so.6": {"GLIBC_9.99"}},
    ],
)
def test_the_symbol_version_policy_is_auditwheels(needs: dict[str, set[str]]) -> None:
    ours = manylinux_policies("glibc", "x86_64").versioned_symbols_policy(needs)
    assert ours.name == their_policies("glibc", "x86_64").versioned_symbols_policy(needs).name


def test_architectures_baselines_and_supersets_are_auditwheels() -> None:
    architecture = pytest.importorskip("auditwheel.architecture")
    Architecture = architecture.Architecture

    assert list(ARCHITECTURES) == [a.value for a in Architecture]
    for a in Architecture:
        assert baseline(a.value) == a.baseline.value
        for b in Architecture:
            assert is_superset(a.value, b.value) == a.is_superset(b), (a, b)


@pytest.mark.parametrize("libc", ["glibc", "musl"])
@pytest.mark.parametrize("ld_library_path", [None, "/usr/lib:/nonexistent::/lib/$ORIGIN/x"])
def test_the_host_search_path_is_auditwheels_load_ld_paths(
    monkeypatch: pytest.MonkeyPatch, libc: str, ld_library_path: str | None
) -> None:
    lddtree = pytest.importorskip("auditwheel.lddtree")
    from auditwheel.libc import Libc

    if ld_library_path is None:
        monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    else:
        monkeypatch.setenv("LD_LIBRARY_PATH", ld_library_path.replace(":/lib/$ORIGIN/x", ""))
    monkeypatch.delenv("AUDITWHEEL_LD_LIBRARY_PATH", raising=False)
    # (auditwheel's load_ld_paths extends the list its cached parse_ld_so_conf returned: a
    # second call in one process repeats the trusted directories, so both caches start empty)
    lddtree.load_ld_paths.cache_clear()
    lddtree.parse_ld_so_conf.cache_clear()
    host_search.cache_clear()
    theirs = lddtree.load_ld_paths(Libc(libc))
    if ld_library_path is not None:  # an $ORIGIN entry, which auditwheel cannot take, is left out
        monkeypatch.setenv("LD_LIBRARY_PATH", ld_library_path)
    assert host_search(libc) == (tuple(theirs["env"]), tuple(theirs["conf"]))
    host_search.cache_clear()


@given(st.text(alphabet="a/.", max_size=12))
def test_member_directories_are_posixpaths_dirnames(name: str) -> None:
    assert _dirname(name) == posixpath.dirname(name)


def test_pep600_allows_a_tag_between_auditwheels_policies_that_the_glibc_versions_fit() -> None:
    v = replace(verdict("manylinux_2_26_x86_64"), needs=(2, 25))  # GLIBC_2.25 at most
    assert not v.has_policy("manylinux_2_25_x86_64")
    assert v.allows("manylinux_2_25_x86_64") is True
    assert v.allows("manylinux_2_24_x86_64") is False
    assert v.pep600_tag() == "manylinux_2_25_x86_64"


def test_legacy_aliases_are_compared_as_the_pep600_tags_they_stand_for() -> None:
    assert pep600("manylinux1_x86_64") == ("manylinux", (2, 5), "x86_64")
    assert pep600("manylinux2010_x86_64") == ("manylinux", (2, 12), "x86_64")
    assert pep600("manylinux2014_aarch64") == ("manylinux", (2, 17), "aarch64")
    assert (
        replace(verdict("manylinux_2_12_x86_64"), needs=(2, 12)).allows("manylinux1_x86_64")
        is False
    )


def test_a_wheel_whose_elf_files_need_no_libc_fits_every_libc_tag_of_its_arch() -> None:
    v = replace(verdict("manylinux_2_5_x86_64"), needs=(2, 5), libc_free=True)
    assert v.allows("musllinux_1_1_x86_64") and v.allows("manylinux1_x86_64")
    assert v.allows("musllinux_1_1_aarch64") is None
    assert replace(v, libc_free=False).allows("musllinux_1_1_x86_64") is None


def test_glibc_needed_is_the_newest_glibc_version_not_libstdcxx() -> None:
    versioned = {"libc.so.6": {"GLIBC_2.2.5", "GLIBC_2.25"}, "libstdc++.so.6": {"GLIBCXX_3.4.30"}}
    assert glibc_needed(versioned) == (2, 25)
    assert glibc_needed({"libstdc++.so.6": {"GLIBCXX_3.4"}}) is None


def test_the_host_libc_is_auditwheels() -> None:
    libc = pytest.importorskip("auditwheel.libc")
    from wheels.policy.manylinux import _host_musl_policy, host_has_musl_libc
    from wheels.policy.wheel_abi import _host_libc

    musl = libc.Libc.detect() == libc.Libc.MUSL
    assert host_has_musl_libc() == musl and _host_libc() == str(libc.Libc.detect().value)
    if not musl:
        assert _host_musl_policy() is None


def test_every_vendors_local_version_pattern_compiles() -> None:
    """Each vendor's local version pattern is a regular expression that matches its own
    locals."""
    examples = {"cpu": "cpu", "nvidia": "cu130", "moore": "musa43", "thead": "ppu10"}
    for name in vendor_names():
        policy = load_vendor_policy(name)
        assert policy.local is not None, name
        assert re.compile(policy.local.pattern).match(examples[name]), name
        assert policy.local.match(examples[name]) is not None, name
