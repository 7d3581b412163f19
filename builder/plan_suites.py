"""Planning a component's own tests: its in-build test (a build beside the shipped one with the
recipe's test options, and a command run in it: InfiniRT's ctest) and its pytest suite (the
command, its environment, and the build it needs beside the shipped one: InfiniOps' Python
bindings). Neither changes the entry's key. Pure, as :mod:`builder.plan` is.

The suite runs from the component's checkout against its store entry, the one the wheel
bundles: ``LD_LIBRARY_PATH`` names the entry's ``lib/`` and its dependencies', so a module the
suite build made loads the shipped libraries, never its own build's (the suite build links
without a build RPATH).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from builder.manifest.model import Deselected, Suite, SuiteBuild, TestSpec

SUITE_STEP_CONFIGURE = "suite-configure"
SUITE_STEP_BUILD = "suite-build"
TEST_STEP_CONFIGURE = "test-configure"
TEST_STEP_BUILD = "test-build"
TEST_STEP = "test"
MAX_WORKER_RESTARTS = 100  # crashed tests a suite survives before xdist stops it


@dataclass(frozen=True, kw_only=True)
class SuiteStep:
    kind: str
    argv: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class PlannedSuite:
    cwd: Path  # the component's checkout
    argv: tuple[str, ...]  # python -m pytest ... (the run adds its JUnit file)
    workers: int
    env: Mapping[str, str]
    steps: tuple[SuiteStep, ...] = ()  # the suite's own build, when it has one
    build_dir: Path | None = None
    target: str | None = None
    package_dir: Path | None = None  # <build_dir>/python/<package>: the built module goes here
    deselected: tuple[Deselected, ...] = ()
    selected: tuple[str, ...] = ()
    library_dirs: tuple[Path, ...] = field(default=())


def configure_argv(
    cmake_source: Path, build_dir: Path, defines: Mapping[str, str]
) -> tuple[str, ...]:
    """``cmake`` configuring ``cmake_source`` into ``build_dir`` with Ninja and ``defines``: the
    entry's configure, and a build's beside it."""
    options = (f"-D{k}={v}" for k, v in defines.items())
    return ("cmake", "-S", str(cmake_source), "-B", str(build_dir), "-G", "Ninja", *options)


@dataclass(frozen=True, kw_only=True)
class PlannedTest:
    """A recipe's in-build test (``test.options``, ``test.command``): the component configured
    with the test options in a directory beside its build (``<build dir>.test``), built there,
    and the command run there. The entry is built without the options, so a tested build and a
    plain one share their keys, and ``wheel`` after ``build --test`` packages what was tested."""

    build_dir: Path
    options: Mapping[str, str]
    command: tuple[str, ...]
    steps: tuple[SuiteStep, ...]  # its configure and build; the command runs after them


def plan_test(
    test: TestSpec,
    *,
    cmake_source: Path,
    build_dir: Path,
    defines: Mapping[str, str],
    jobs: int,
) -> PlannedTest:
    """The entry's configure plus the test's options, in ``<build dir>.test``."""
    test_dir = build_dir.with_name(build_dir.name + ".test")
    configure = configure_argv(cmake_source, test_dir, {**defines, **test.options})
    build = ("cmake", "--build", str(test_dir), "--parallel", str(jobs))
    return PlannedTest(
        build_dir=test_dir,
        options=dict(test.options),
        command=test.command,
        steps=(
            SuiteStep(kind=TEST_STEP_CONFIGURE, argv=configure),
            SuiteStep(kind=TEST_STEP_BUILD, argv=build),
        ),
    )


def plan_suite(
    suite: Suite,
    *,
    vendor: str,
    python: str,
    source_dir: Path,
    cmake_source: Path,
    build_dir: Path,
    prefix: Path,
    dependency_prefixes: tuple[Path, ...],
    defines: Mapping[str, str],
    jobs: int,
    toolkit: Path | None = None,
) -> PlannedSuite:
    """The suite of one component for ``vendor``: ``{vendor}`` in its arguments is the
    vendor's name (InfiniOps' ``--devices nvidia``). ``toolkit``, the vendor's toolkit root,
    gives a compiler the suite runs its headers and libraries: InfiniRT's installed headers
    include ``cuda_runtime.h`` on NVIDIA."""
    workers = min(suite.workers, max(jobs, 1))
    libs = (prefix / "lib", *(p / "lib" for p in dependency_prefixes))
    includes = (prefix / "include", *(p / "include" for p in dependency_prefixes))
    toolkit_includes = (toolkit / "include",) if toolkit else ()
    toolkit_libs = (toolkit / "lib64",) if toolkit else ()
    env = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",  # the suite's log fills as it runs
        "INFINI_STACK_VENDOR": vendor,
        "INFINI_STACK_PREFIX": str(prefix),
        # The entry and its dependencies as an install would give them: to the loader, and to
        # a compiler the suite runs (InfiniOps' C++ API tests link -linfiniops -linfinirt).
        "LD_LIBRARY_PATH": ":".join(str(p) for p in libs),
        "LIBRARY_PATH": ":".join(str(p) for p in (*libs, *toolkit_libs)),
        "CPATH": ":".join(str(p) for p in (*includes, *toolkit_includes)),
        # Each worker's share of the job budget: torch and OpenMP kernels take every core
        # otherwise, and -n workers would each take them all.
        "OMP_NUM_THREADS": str(max(1, jobs // workers)),
        **{k: v.replace("{prefix}", str(prefix)) for k, v in suite.env.items()},
    }
    planned = PlannedSuite(
        cwd=source_dir,
        argv=_pytest_argv(suite, vendor, python, workers),
        workers=workers,
        env=env,
        deselected=suite.deselect,
        selected=suite.select,
        library_dirs=libs,
    )
    if suite.build is None:
        return planned
    suite_dir = build_dir.with_name(build_dir.name + ".suite")
    python_dir = suite_dir / "python"
    return replace(
        planned,
        env={**env, "PYTHONPATH": str(python_dir)},
        steps=_build_steps(suite.build, cmake_source, suite_dir, defines, jobs, prefix),
        build_dir=suite_dir,
        target=suite.build.target,
        package_dir=python_dir / suite.build.package,
    )


def _pytest_argv(suite: Suite, vendor: str, python: str, workers: int) -> tuple[str, ...]:
    args = tuple(a.replace("{vendor}", vendor) for a in suite.args)
    # Always in pytest-xdist's worker processes, one worker too: a test that kills its process
    # (a segfault, SIGFPE in a kernel launch) is then one failed test, and the rest still run.
    parallel = ("-n", str(workers), f"--max-worker-restart={MAX_WORKER_RESTARTS}")
    return (
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",  # nothing written into the checkout
        "--rootdir=.",  # node ids (select, deselect) relative to the checkout
        "-rfEs",
        "--durations=10",
        *parallel,
        *args,
        *(_deselect_arg(d) for d in suite.deselect),
        *suite.select,
    )


def _build_steps(
    build: SuiteBuild,
    cmake_source: Path,
    suite_dir: Path,
    defines: Mapping[str, str],
    jobs: int,
    prefix: Path,
) -> tuple[SuiteStep, ...]:
    """The component's configure with the suite's options (``{prefix}`` in a value is the
    entry's prefix), in a directory of its own, linked without a build RPATH (its module then
    loads the entry's libraries); then its target."""
    options = {k: v.replace("{prefix}", str(prefix)) for k, v in build.options.items()}
    own = {**defines, **options, "CMAKE_SKIP_BUILD_RPATH": "ON"}
    configure = configure_argv(cmake_source, suite_dir, own)
    target = ("cmake", "--build", str(suite_dir), "--target", build.target, "--parallel", str(jobs))
    return (
        SuiteStep(kind=SUITE_STEP_CONFIGURE, argv=configure),
        SuiteStep(kind=SUITE_STEP_BUILD, argv=target),
    )


def _deselect_arg(d: Deselected) -> str:
    """A node id is deselected; a file or directory is not even collected (a module whose
    import fails, such as one needing a package this vendor lacks, must not be imported)."""
    if "::" in d.test:
        return f"--deselect={d.test}"
    return f"--ignore={d.test}"


def suite_json(suite: PlannedSuite | None) -> dict[str, Any] | None:
    if suite is None:
        return None
    return {
        "cwd": str(suite.cwd),
        "argv": list(suite.argv),
        "env": dict(suite.env),
        "steps": [{"kind": s.kind, "argv": list(s.argv)} for s in suite.steps],
        "deselected": [{"test": d.test, "reason": d.reason} for d in suite.deselected],
    }


def test_json(test: PlannedTest | None) -> dict[str, Any] | None:
    if test is None:
        return None
    return {
        "build_dir": str(test.build_dir),
        "options": dict(test.options),
        "steps": [{"kind": s.kind, "argv": list(s.argv)} for s in test.steps],
        "command": list(test.command),
    }


def in_build_test(test: TestSpec | None) -> TestSpec | None:
    """The test when it builds or runs beside the entry (options, a command), not only a
    pytest suite."""
    return test if test is not None and test.in_build else None
