"""The probe shape: candidates in order -> version -> first satisfying match -> a result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.providers import search
from builder.providers.common import compiler_version
from builder.providers.cpu import mpi_version
from builder.providers.musa import mcc_version, toolkits_version
from builder.providers.probe import (
    BUILD,
    RUN,
    Candidate,
    ComponentNeeds,
    Deps,
    ProbeContext,
    Provider,
    ProviderResult,
    Purpose,
    Reading,
    Rule,
    Selection,
    evaluate,
    is_on,
    judge,
    needed_by,
    specifier,
    unusable,
)
from tests import standins

VERSIONS = {"/a": "11.8", "/b": "12.6", "/c": "13.0"}


def fake_provider(
    paths: list[str], *, needed_for: tuple[Purpose, ...] = BUILD, optional: bool = False
) -> Provider:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        for i, p in enumerate(paths):
            yield Candidate(path=Path(p), origin=f"origin{i}")

    def read(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
        key = str(candidate.path)
        if key == "/boom":
            raise OSError("permission denied")
        if key not in VERSIONS:
            return unusable("does not exist")
        return Reading(version=VERSIONS[key], source="fake --version")

    return Provider(
        name="fake",
        what="a fake",
        needed_for=needed_for,
        candidates=candidates,
        read=read,
        hint="install fake",
        optional=optional,
    )


def run(provider: Provider, wanted: str = "", purpose: Purpose = "build") -> ProviderResult:
    ctx = standins.context(constraints={"fake": wanted} if wanted else {}, purpose=purpose)
    return evaluate(provider, ctx, {}, purpose=purpose, components=("infinirt",))


def test_first_candidate_satisfying_the_specifier_wins_and_earlier_ones_are_reported() -> None:
    result = run(fake_provider(["/a", "/b", "/c"]), ">=12.4")
    assert result.status == "found"
    assert result.path == "/b" and result.version == "12.6"
    assert result.origin == "origin1"
    assert any("/a" in d and "11.8" in d for d in result.details)


def test_no_candidate_satisfying_is_wrong_version_reporting_the_first_found() -> None:
    result = run(fake_provider(["/a", "/b"]), ">=13")
    assert result.status == "wrong version"
    assert result.version == "11.8" and result.hint == "install fake"
    assert result.failed


def test_no_usable_candidate_is_missing_with_the_hint_and_why_each_was_skipped() -> None:
    result = run(fake_provider(["/nowhere"]))
    assert result.status == "missing" and result.hint == "install fake"
    assert result.details == ("skipped /nowhere [origin0]: does not exist",)


def test_a_reader_that_raises_is_a_skip_reason_not_a_traceback() -> None:
    result = run(fake_provider(["/boom", "/c"]))
    assert result.status == "found" and result.path == "/c"
    assert any("permission denied" in d for d in result.details)


def test_duplicate_candidates_are_read_once() -> None:
    result = run(fake_provider(["/a", "/a", "/a"]), ">=99")
    assert len(result.details) == 1


def test_a_run_time_provider_absent_at_build_time_is_a_note_not_a_failure() -> None:
    build = run(fake_provider(["/nowhere"], needed_for=RUN), purpose="build")
    assert build.status == "note" and not build.failed
    run_ = run(fake_provider(["/nowhere"], needed_for=RUN), purpose="run")
    assert run_.status == "missing" and run_.failed


def test_an_optional_provider_absent_is_a_note() -> None:
    result = run(fake_provider(["/nowhere"], optional=True))
    assert result.status == "note" and not result.failed


def test_fingerprint_is_version_at_path() -> None:
    assert run(fake_provider(["/c"])).fingerprint() == "13.0@/c"


@pytest.mark.parametrize(
    ("version", "wanted", "status"),
    [
        ("13.0", ">=12.4", "found"),
        ("12.2", ">=12.4", "wrong version"),
        (None, ">=12.4", "unknown version"),
        ("garbage", ">=12.4", "unknown version"),
        (None, "", "found"),
        ("2.32.3", ">=2.18,<3", "found"),
        ("13.0.0rc1", ">=12", "found"),
    ],
)
def test_judge_maps_version_and_specifier_to_a_status(
    version: str | None, wanted: str, status: str
) -> None:
    assert judge(Reading(version=version), specifier(wanted)) == status


def test_a_reader_verdict_overrides_the_specifier() -> None:
    assert judge(Reading(version="90", satisfied=False), None) == "wrong version"


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("ON", True),
        ("yes", True),
        ("1", True),
        ("OFF", False),
        ("0", False),
        (None, False),
        ("maybe", False),
    ],
)
def test_cmake_truthiness(value: str | None, on: bool) -> None:
    assert is_on(value) is on


def test_rules_pick_components_by_name_and_option_and_the_wheel() -> None:
    selection = Selection(
        components={
            "infiniccl": ComponentNeeds(options={"WITH_OMPI": "ON"}),
            "miniccl": ComponentNeeds(options={"WITH_OMPI": "ON"}),
            "infinilm": ComponentNeeds(options={}, python=True),
        },
        wheel=True,
    )
    mpi = (Rule(names=frozenset({"infiniccl"}), options=("WITH_OMPI", "WITH_MPICH")),)
    assert needed_by(mpi, selection) == ("infiniccl",)
    assert needed_by((Rule(python=True), Rule(wheel=True)), selection) == ("infinilm", "wheel")
    assert needed_by((Rule(options=("WITH_NCCL",)),), selection) == ()


def test_a_provider_the_stack_supplies_itself_is_not_needed_from_the_host() -> None:
    rule = (
        Rule(
            names=frozenset({"infiniops"}),
            options=("WITH_NVIDIA",),
            unless="FETCHCONTENT_SOURCE_DIR_CUTLASS",
        ),
    )
    own = ComponentNeeds(
        options={"WITH_NVIDIA": "ON"}, provided=frozenset({"FETCHCONTENT_SOURCE_DIR_CUTLASS"})
    )
    host = ComponentNeeds(options={"WITH_NVIDIA": "ON"})
    assert needed_by(rule, Selection(components={"infiniops": own})) == ()
    assert needed_by(rule, Selection(components={"infiniops": host})) == ("infiniops",)


def test_pybind11_is_needed_by_the_extension_component_not_every_python_user() -> None:
    selection = Selection(
        components={
            "infinirt": ComponentNeeds(options={}, python=True),
            "infinilm": ComponentNeeds(options={}, python=True, extension=True),
        }
    )
    assert needed_by((Rule(extension=True),), selection) == ("infinilm",)


# -- version sources -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("g++ (Debian 12.2.0-14+deb12u1) 12.2.0", "12.2.0"),
        ("Ubuntu clang version 14.0.0-1ubuntu1.1", "14.0.0"),
        ("c++ (GCC) 13.2.1 20231011 (Red Hat 13.2.1-4)", "13.2.1"),
    ],
)
def test_compiler_version_is_read_from_the_first_line(line: str, version: str) -> None:
    assert compiler_version(line) == version


def test_mcc_version_is_mccs_line_not_clangs() -> None:
    text = "clang version 14.0.0\nmcc version 5.2.0\nTarget: x86_64-unknown-linux-gnu\n"
    assert mcc_version(text) == "5.2.0"
    assert mcc_version("clang version 14.0.0\n") is None


def test_musa_toolkits_version_reads_both_known_formats() -> None:
    assert toolkits_version('musa_toolkits:{"version":"4.3.0","git branch":"x"}') == "4.3.0"
    assert toolkits_version("musa_toolkits version: 5.2.0\ntoolkit tag: y\n") == "5.2.0"
    assert toolkits_version("musa_toolkits:{not json") is None


def test_header_macros_give_dotted_and_cuda_encoded_versions(tmp_path: Path) -> None:
    nccl = standins.header(
        tmp_path / "nccl.h", {"NCCL_MAJOR": 2, "NCCL_MINOR": 21, "NCCL_PATCH": 5}
    )
    assert search.macro_version(nccl, ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")) == "2.21.5"
    assert search.encoded_version("13000") == "13.0"
    assert search.encoded_version("12040") == "12.4"
    broken = standins.header(tmp_path / "broken.h", {"NCCL_MAJOR": "TWO", "NCCL_MINOR": 1})
    assert search.macro_version(broken, ("NCCL_MAJOR", "NCCL_MINOR")) is None


def test_mpi_version_from_open_mpi_and_mpich_headers(tmp_path: Path) -> None:
    ompi = standins.header(
        tmp_path / "o" / "mpi.h",
        {"OMPI_MAJOR_VERSION": 4, "OMPI_MINOR_VERSION": 1, "OMPI_RELEASE_VERSION": 4},
    )
    assert mpi_version(ompi)[0] == "4.1.4"
    mpich = standins.header(tmp_path / "m" / "mpi.h", {"MPICH_VERSION": '"4.0.2"'})
    assert mpi_version(mpich)[0] == "4.0.2"


def test_dist_info_index_normalizes_names_and_reads_metadata(tmp_path: Path) -> None:
    standins.dist_info(tmp_path, "nvidia-nccl-cu13", "2.32.3")
    index = search.index_distributions([tmp_path])
    (found,) = index["nvidia-nccl-cu13"]
    assert search.metadata_version(found) == "2.32.3"
    assert search.normalize("NVIDIA_nccl.cu13") == "nvidia-nccl-cu13"
