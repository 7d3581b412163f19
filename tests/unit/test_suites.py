"""Each component's own pytest suite: its recipe keys (validated, with did-you-mean), its plan
(the vendor's devices, the build beside the shipped one, no key changed), and what a real
pytest run's JUnit file says (counts, xfails, the slowest tests, failures' first lines)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.plan import render
from builder.core.errors import ManifestError
from builder.engine.suite import crash_lines, read_junit, suite_failure
from builder.engine.suite_report import suites_html, suites_text
from builder.manifest.loader import load_stack
from tests.planning import CUDA, ROOT
from tests.planning import plan_for as planned

SHA = "a" * 40


def recipe_problems(tmp_path: Path, test: str) -> list[str]:
    (tmp_path / "components").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "components" / "rt.yaml").write_text(
        "vendors:\n  cpu: {options: {WITH_CPU: ON}}\ntest:\n" + test
    )
    (tmp_path / "stack.yaml").write_text("vendors:\n  cpu: {}\ncomponents:\n  rt: {path: src}\n")
    with pytest.raises(ManifestError) as info:
        load_stack(tmp_path / "stack.yaml")
    return list(info.value.problems)


# --- the recipe keys ----------------------------------------------------------------------------


def test_a_misspelled_suite_key_gets_did_you_mean(tmp_path: Path) -> None:
    (found,) = recipe_problems(tmp_path, "  pytest: []\n  deselcet: {a.py: why}\n")
    assert found.endswith("unknown key 'deselcet' in 'test'; did you mean 'deselect'?")


def test_a_deselection_without_its_reason_is_refused(tmp_path: Path) -> None:
    (found,) = recipe_problems(tmp_path, "  pytest: []\n  deselect: {tests/test_a.py: ''}\n")
    assert found.endswith("deselecting 'tests/test_a.py' needs its reason")


def test_narrowing_without_a_pytest_suite_is_refused(tmp_path: Path) -> None:
    (found,) = recipe_problems(tmp_path, "  command: [ctest]\n  select: [tests]\n")
    assert found.endswith("'select' narrows or runs a 'pytest' suite: add one")


def test_workers_must_be_a_whole_number(tmp_path: Path) -> None:
    (found,) = recipe_problems(tmp_path, "  pytest: []\n  workers: two\n")
    assert found.endswith("'workers' must be a whole number of at least 1")


def test_a_suite_build_needs_its_target_and_package(tmp_path: Path) -> None:
    found = recipe_problems(tmp_path, "  pytest: []\n  build: {options: {A: ON}, targt: ops}\n")
    assert any("unknown key 'targt' in 'test.build'; did you mean 'target'?" in p for p in found)
    assert any("missing required key 'test.build.package'" in p for p in found)


# --- the plan -----------------------------------------------------------------------------------


def test_cpu_infiniops_suite_runs_from_its_checkout_with_the_cpu_devices() -> None:
    plan = planned("cpu", suites=True)
    ops = plan.get("infiniops")
    assert ops.suite is not None
    argv = ops.suite.argv
    assert argv[:3] == ("/usr/bin/python3", "-m", "pytest")
    assert argv[argv.index("--devices") + 1] == "cpu"
    assert argv[-1] == "tests"
    assert ops.suite.cwd == ops.source_dir
    assert argv[argv.index("-n") : argv.index("-n") + 2] == ("-n", "2")
    assert ops.suite.env["OMP_NUM_THREADS"] == "4"  # 8 jobs over 2 workers


def test_nvidia_plan_shows_the_infiniops_suite_with_the_nvidia_devices() -> None:
    plan = planned("nvidia", CUDA, suites=True)
    suite = plan.get("infiniops").suite
    assert suite is not None
    assert suite.argv[suite.argv.index("--devices") + 1] == "nvidia"
    # In xdist's workers, so a test that kills its process is one failure, not the suite's end.
    assert suite.argv[suite.argv.index("-n") + 1] == "4"
    assert "--max-worker-restart=100" in suite.argv
    text = render(plan)
    assert "#  suite (build --test, release), on the entry the wheel bundles:" in text
    assert "pytest -p no:cacheprovider" in text and "--devices nvidia" in text


def test_the_bindings_are_built_beside_the_shipped_library_which_keeps_its_key() -> None:
    shipped = planned("cpu").get("infiniops")
    tested = planned("cpu", suites=True).get("infiniops")  # as release plans it
    assert tested.key == shipped.key  # the suite runs on the entry the wheel bundles
    assert tested.defines == shipped.defines
    assert tested.defines["GENERATE_PYTHON_BINDINGS"] == "OFF"
    suite = tested.suite
    assert suite is not None and suite.build_dir is not None
    configure, build = (s.argv for s in suite.steps)
    assert "-DGENERATE_PYTHON_BINDINGS=ON" in configure
    assert "-DCMAKE_SKIP_BUILD_RPATH=ON" in configure  # the module loads the entry's library
    assert configure[configure.index("-B") + 1] == str(suite.build_dir)
    assert suite.build_dir != shipped.build_dir
    assert build[build.index("--target") + 1] == "ops"
    assert suite.package_dir == suite.build_dir / "python" / "infini"
    assert suite.env["PYTHONPATH"] == str(suite.build_dir / "python")
    # Its module links the entry's library ({prefix} in an option), not a second build of it.
    shipped_library = f"-DINFINI_STACK_SHIPPED_LIBRARY={tested.prefix}/lib/libinfiniops.so"
    assert shipped_library in configure


def test_the_suite_loads_the_entry_and_its_dependencies_libraries() -> None:
    plan = planned("cpu", suites=True)
    suite = plan.get("infiniops").suite
    assert suite is not None
    assert suite.env["LD_LIBRARY_PATH"].split(":") == [
        str(plan.get("infiniops").prefix / "lib"),
        str(plan.get("infinirt").prefix / "lib"),
    ]
    assert suite.env["INFINI_STACK_PREFIX"] == str(plan.get("infiniops").prefix)
    # InfiniOps' C++ API tests compile against the installed library: the entry's.
    assert suite.env["INFINI_OPS_INSTALL_PREFIX"] == str(plan.get("infiniops").prefix)
    assert suite.env["LIBRARY_PATH"] == suite.env["LD_LIBRARY_PATH"]


def test_a_compiler_the_nvidia_suite_runs_finds_the_cuda_headers_and_libraries() -> None:
    # InfiniRT's installed headers include cuda_runtime.h on NVIDIA (the H100 run's C++ API
    # tests stopped there); on cpu no toolkit is added.
    suite = planned("nvidia", CUDA, suites=True).get("infiniops").suite
    assert suite is not None
    assert suite.env["CPATH"].split(":")[-1] == str(CUDA.root / "include")
    assert suite.env["LIBRARY_PATH"].split(":")[-1] == str(CUDA.root / "lib64")
    assert str(CUDA.root) not in suite.env["LD_LIBRARY_PATH"]  # torch loads its own runtime
    cpu = planned("cpu", suites=True).get("infiniops").suite
    assert cpu is not None and cpu.env["LIBRARY_PATH"] == cpu.env["LD_LIBRARY_PATH"]


def test_infinilm_runs_its_static_contracts_and_script_tests() -> None:
    suite = planned("cpu", suites=True).get("infinilm").suite
    assert suite is not None
    assert suite.selected == ("test/static", "test/scripts")
    assert suite.argv[-2:] == ("test/static", "test/scripts")


def test_in_build_tests_build_beside_the_entry_and_change_no_key() -> None:
    # build --test, then wheel: the wheel packages the entries that were tested.
    tested, plain = planned("cpu", tests=True), planned("cpu")
    assert [c.key for c in tested.components] == [c.key for c in plain.components]
    infinirt = tested.get("infinirt")
    test = infinirt.test
    assert test is not None and plain.get("infinirt").test is None
    assert test.build_dir == infinirt.build_dir.with_name(infinirt.build_dir.name + ".test")
    configure, build = (s.argv for s in test.steps)
    assert "-DINFINI_RT_BUILD_TESTING=ON" in configure
    assert configure[configure.index("-B") + 1] == str(test.build_dir)
    assert build[:3] == ("cmake", "--build", str(test.build_dir))
    assert test.command == ("ctest", "--output-on-failure")
    # the entry itself is built with the recipe's own options, the test's left out
    assert infinirt.defines["INFINI_RT_BUILD_TESTING"] == "OFF"
    assert all(s.kind != "test" for s in infinirt.steps)


def test_a_test_build_has_the_entry_s_configure_and_its_dependencies() -> None:
    tested = planned("cpu", tests=True)
    infiniccl = tested.get("infiniccl")
    assert infiniccl.test is not None
    configure = infiniccl.test.steps[0].argv
    entry_defines = {f"-D{k}={v}" for k, v in infiniccl.defines.items()}
    assert entry_defines - {"-DBUILD_EXAMPLES=OFF"} <= set(configure)
    assert "-DBUILD_EXAMPLES=ON" in configure


def test_without_suites_nothing_is_planned_to_run() -> None:
    assert all(c.suite is None for c in planned("cpu", tests=True).components)


# --- a real pytest run's JUnit file -------------------------------------------------------------

SUITE = """
import pytest

def test_passes():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    pass

def test_fails():
    value = 41
    assert value == 42, "the answer"

@pytest.mark.skip(reason="operator 'gemm' is not in this build")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

class TestGroup:
    def test_in_class(self):
        pass
"""


@pytest.fixture(scope="module")
def junit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("suite")
    (root / "tests").mkdir()
    (root / "tests" / "test_some.py").write_text(SUITE)
    xml = root / "out.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir=.",
            "-q",
            f"--junitxml={xml}",
            "-o",
            "junit_family=xunit1",
            "tests",
        ],
        cwd=root,
        capture_output=True,
        check=False,
    )
    return xml


def test_junit_counts_passed_failed_skipped_and_xfailed(junit: Path) -> None:
    read = read_junit(junit)
    assert read["counts"] == {"passed": 4, "failed": 1, "errors": 0, "skipped": 1, "xfailed": 1}
    assert read["skip_reasons"] == [{"reason": "operator 'gemm' is not in this build", "count": 1}]


def test_junit_failures_are_named_by_node_id_with_their_first_lines(junit: Path) -> None:
    (failure,) = read_junit(junit)["failures"]
    assert failure["test"] == "tests/test_some.py::test_fails"
    assert "the answer" in failure["output"]
    assert len(failure["output"].splitlines()) <= 12
    tests = {s["test"] for s in read_junit(junit)["slowest"]}
    assert "tests/test_some.py::TestGroup::test_in_class" in tests
    assert "tests/test_some.py::test_param[2]" in tests


def test_a_failed_suite_is_reported_with_its_deselections_and_failures(junit: Path) -> None:
    record = {
        **read_junit(junit),
        "ok": False,
        "returncode": 1,
        "seconds": 1.0,
        "command": ["python", "-m", "pytest"],
        "deselected": [{"test": "tests/test_big.py", "reason": "takes minutes"}],
    }
    message = suite_failure("miniops", record)
    assert message.startswith("component 'miniops', suite: 1 test(s) failed (4 passed, 1 failed")
    assert "  FAILED tests/test_some.py::test_fails" in message
    components = [{"name": "miniops", "suite": record}]
    text = suites_text({"components": components})
    assert "suite miniops: FAILED, 4 passed, 1 failed, 1 skipped, 1 xfailed, 1 deselected" in text
    assert "  deselected tests/test_big.py: takes minutes" in text
    page = suites_html(components)
    assert "<section id='suites'>" in page and "takes minutes" in page and "the answer" in page


# --- the key ------------------------------------------------------------------------------------


def test_editing_a_suite_makes_no_new_entry_but_editing_the_build_does(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "components", tmp_path / "components")
    shutil.copy(ROOT / "stack.yaml", tmp_path / "stack.yaml")
    before = planned("cpu", root=tmp_path).get("infiniops").key
    recipe = tmp_path / "components" / "infiniops.yaml"
    text = recipe.read_text()
    edited = text.replace("this test asserts its binding exists", "this test asserts it exists")
    edited = edited.replace("      workers: 2\n", "      workers: 1\n")
    assert edited != text
    recipe.write_text(edited)
    assert planned("cpu", root=tmp_path).get("infiniops").key == before
    recipe.write_text(
        edited.replace("WITH_CPU: ON, INFINI_OPS_OPS", "WITH_CPU: ON, X: ON, INFINI_OPS_OPS")
    )
    assert planned("cpu", root=tmp_path).get("infiniops").key != before


def test_a_dead_pytest_is_quoted_from_its_fatal_error_on(tmp_path: Path) -> None:
    log = tmp_path / "suite.log"
    log.write_text(
        "tests/test_add.py ......\n"
        "Fatal Python error: Floating point exception\n\n"
        "Current thread 0x00007efd57488540 (most recent call first):\n"
        '  File "tests/test_add.py", line 260 in _add\n'
    )
    assert crash_lines(log).splitlines() == [
        "Fatal Python error: Floating point exception",
        "",
        "Current thread 0x00007efd57488540 (most recent call first):",
        '  File "tests/test_add.py", line 260 in _add',
    ]
    record = {"returncode": -8, "command": ["pytest"], "crash": crash_lines(log)}
    said = suite_failure("infiniops", record)
    assert "pytest exited with status -8" in said
    assert "  pytest did not finish; its log ends:" in said
    assert "    | Fatal Python error: Floating point exception" in said
