"""Sanitizer profiles built for real with gcc's sanitizers: each catches the bug it exists for.

tests/fixtures/sanitizer-bugs is one component whose four tests each carry one planted bug
(heap buffer overflow, use after free, signed integer overflow, data race), harmless in a
plain build. Each profile must name exactly the kinds it is for, with the line marked
``BUG:``; dropping a sanitizer from the profile drops its findings, so each assertion fails
without its flag. A fifth test, clean, has CMake build and run a consumer of the component's
library under the profile, as InfiniRT's ``test_install_consumer`` does. The bundled mini stack,
with no bug planted, passes every gate sanitized.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import HAVE_NVCC, last_report

pytestmark = pytest.mark.integration

BUGS = Path(__file__).resolve().parents[1] / "fixtures" / "sanitizer-bugs"
SOURCE = BUGS / "bugs" / "bugs.cpp"


def bug_line(kind: str) -> int:
    """The line of bugs.cpp marked ``BUG: kind``."""
    for number, line in enumerate(SOURCE.read_text().splitlines(), start=1):
        if f"// BUG: {kind}" in line:
            return number
    raise AssertionError(f"no line marked BUG: {kind}")


# What each report names the planted bug: (sanitizer, kind) -> the BUG: marker.
HEAP_OVERFLOW = ("address", "heap-buffer-overflow")
USE_AFTER_FREE = ("address", "heap-use-after-free")
INT_OVERFLOW = ("undefined", "signed integer overflow")
RACE = ("thread", "data race")
MARKERS = {
    HEAP_OVERFLOW: "heap-buffer-overflow",
    USE_AFTER_FREE: "heap-use-after-free",
    INT_OVERFLOW: "signed-integer-overflow",
    RACE: "data-race",
    ("thread", "heap-use-after-free"): "heap-use-after-free",  # TSan sees that one too
}


def consumer_passed(home: Path) -> bool:
    """Whether ctest's consumer test (CMake configures, builds and runs a program that loads the
    built library, as InfiniRT's test_install_consumer) passed."""
    (bugs,) = last_report(home)["components"]
    log = Path(bugs["logs"]["test"]).read_text()
    return re.search(r"Test +#\d+: consumer \.+ +Passed", log) is not None


def found(home: Path) -> dict[tuple[str, str], str]:
    (bugs,) = last_report(home)["components"]
    return {(f["sanitizer"], f["kind"]): f["where"] for f in bugs["findings"]}


def test_the_plain_build_passes_the_planted_bugs_tests(home: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("build", "-m", BUGS / "stack.yaml", "-V", "cpu", "--test", "-j", "2")
    assert result.code == 0, result.err
    (bugs,) = last_report(home)["components"]
    assert bugs["status"] == "built" and bugs["findings"] == []
    assert last_report(home)["sanitize"] is None
    assert consumer_passed(home)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("address,undefined", {HEAP_OVERFLOW, USE_AFTER_FREE, INT_OVERFLOW}),
        ("thread", {RACE, ("thread", "heap-use-after-free")}),
        # Each sanitizer dropped: its findings go with it.
        ("address", {HEAP_OVERFLOW, USE_AFTER_FREE}),
        ("undefined", {INT_OVERFLOW}),
    ],
)
def test_a_sanitized_build_fails_naming_each_bugs_kind_and_line(
    home: Path,
    cli,  # type: ignore[no-untyped-def]
    profile: str,
    expected: set[tuple[str, str]],
) -> None:
    result = cli(
        "build", "-m", BUGS / "stack.yaml", "-V", "cpu", "--test", "-j", "2", "--sanitize", profile
    )
    assert result.code == 5, result.err
    assert "Traceback" not in result.err
    assert f"sanitizer report(s) ({profile})" in result.err
    reports = found(home)
    assert set(reports) == expected
    for (sanitizer, kind), where in reports.items():
        line = bug_line(MARKERS[sanitizer, kind])
        assert re.search(rf"bugs\.cpp:{line}\b", where), (kind, where, line)
        assert f"{sanitizer}: {kind} at {where}" in result.err
    assert last_report(home)["sanitize"] == profile
    # CMake, run by the tests, is not hung by the runtime (TSan preloaded into it was), and the
    # consumer it builds gets the profile, so it loads the runtime first itself.
    assert consumer_passed(home)


def test_a_listed_upstream_finding_lets_the_run_go_on_past_it(
    home: Path,
    cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    import shutil

    stack = tmp_path / "bugs"
    shutil.copytree(BUGS, stack)
    (stack / "components" / "sanitizers").mkdir()
    (stack / "components" / "sanitizers" / "suppressions.yaml").write_text(
        "suppressions:\n"
        "  - sanitizer: thread\n"
        "    kind: race\n"
        "    match: bump\n"
        f"    upstream: bugs.cpp:{bug_line('data-race')}\n"
        "    reason: the planted race, listed to prove the file is read\n"
    )
    result = cli("build", "-m", stack / "stack.yaml", "-V", "cpu", "--test", "--sanitize", "thread")
    assert result.code == 5, result.err
    assert set(found(home)) == {("thread", "heap-use-after-free")}  # the race alone is gone


def test_report_and_the_html_page_show_the_findings(home: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("build", "-m", BUGS / "stack.yaml", "-V", "cpu", "--test", "--sanitize", "thread")
    shown = cli("report")
    assert "sanitizer reports (thread):" in shown.out
    assert "bugs (test): thread: data race at " in shown.out
    assert "in bump" in shown.out or "bump " in shown.out  # the top frame
    page = tmp_path / "report.html"
    assert cli("report", "--html", page).code == 0
    assert "id='sanitizers'" in page.read_text() and "data race" in page.read_text()


@pytest.mark.slow  # the pybind11 module under ASan+UBSan: minutes on two cores
def test_the_sanitized_mini_stack_passes_build_test_wheel_smoke_and_check(
    shared_home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    asan = ("--sanitize", "address,undefined")
    result = cli("wheel", "-m", mini, "-V", "cpu", "--test", "-j", "2", "-o", dist, *asan)
    assert result.code == 0, result.err
    report = last_report(shared_home)
    # Never a plain entry: the plain store it started from has every component already.
    assert {c["status"] for c in report["components"]} == {"built"}
    assert all(not c["findings"] for c in report["components"])
    assert "test" in report["components"][0]["steps"]  # minirt's ctest ran sanitized
    (wheel,) = dist.glob("*.whl")
    assert "+cpu.asan-" in wheel.name
    audit = cli("audit", wheel)
    assert audit.code == 0, audit.out
    assert "libasan.so" in audit.out and "[sanitized]" in audit.out
    smoke = cli("smoke", wheel)
    assert smoke.code == 0, smoke.out + smoke.err
    check = cli("check", wheel, "-m", mini)
    assert check.code == 0, check.err
    # Its code needs the runtime first: without it the check fails (7), which is why it is
    # preloaded.
    bare = cli("check", wheel, "-m", mini, "--sanitize", "none")
    assert bare.code == 7
    assert "ASan runtime does not come first" in bare.err


@pytest.mark.nvcc
@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc is not installed")
def test_the_mini_stacks_nvidia_build_is_sanitized_host_code_included(
    home: Path,
    mini: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    from tests.integration.test_mini_stack import needed

    args = ("build", "-m", mini, "-V", "nvidia", "-j", "2", "-c", "minirt")
    result = cli(*args, "--sanitize", "address,undefined")
    assert result.code == 0, result.err
    (rt,) = last_report(home)["components"]
    libminirt = (Path(rt["prefix"]) / "lib" / "libminirt.so").read_bytes()
    assert {"libasan.so.8", "libubsan.so.1", "libcudart.so.13"} <= set(needed(libminirt))
    cuda_object = next(Path(rt["build_dir"]).rglob("nvidia.cu.o"))
    assert b"__asan_" in cuda_object.read_bytes()  # nvcc's host code is instrumented
