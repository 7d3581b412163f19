"""Sanitizer profiles: ASan+UBSan or TSan across the whole stack, and how sanitized code is run.

A profile is chosen with ``--sanitize address,undefined`` or ``--sanitize thread`` (or a
vendor's ``sanitize:`` in stack.yaml). Every component then compiles and links with the
sanitizer, ``-fno-omit-frame-pointer``, ``-g`` and ``-O0`` (nvcc's host code through
``-Xcompiler``); the profile is part of every key. What runs that code (a component's tests,
``smoke``, the runtime check's children) gets the compiler's own runtime first
(``LD_PRELOAD``) and the options its host needs (:func:`run_env`). docs/sanitizers.md has the
whole story.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import BuildError, UsageError

# In the order a profile spells them.
SANITIZERS = ("address", "undefined", "thread")
# The runtime library each sanitizer needs loaded first when the host program is not built with
# it (Python, ctest): gcc's shared runtimes, found through the compiler that built the stack.
RUNTIMES = {"address": "libasan.so", "undefined": "libubsan.so", "thread": "libtsan.so"}
# The options variable each sanitizer reads, and what every run gets: a report halts the run
# (UBSan would otherwise go on after it) with a stack trace; the exit code says so.
OPTIONS = {
    "address": ("ASAN_OPTIONS", ("abort_on_error=0", "halt_on_error=1")),
    "undefined": ("UBSAN_OPTIONS", ("halt_on_error=1", "print_stacktrace=1")),
    "thread": ("TSAN_OPTIONS", ("halt_on_error=1", "second_deadlock_stack=1")),
}
# Every run preloads the runtime into a host program not built with it (Python, ctest, sh,
# mpirun), which LeakSanitizer then checks too: CPython's arenas and interned objects live
# until exit, and mpirun leaks 145 kB in hwloc, Open MPI and its plugins (unloaded before the
# report, so no suppression by module catches them). Leaks are not what the profiles are for;
# ASAN_OPTIONS=detect_leaks=1 turns them back on (docs/sanitizers.md).
HOST_OPTIONS = {"address": ("detect_leaks=0",)}
# Where CUDA is loaded: the driver maps memory in the shadow gap ASan protects by default.
CUDA_OPTIONS = {"address": ("protect_shadow_gap=0",)}
SPEC_HELP = "address,undefined (ASan+UBSan), thread (TSan), or none"


@dataclass(frozen=True, slots=True)
class Profile:
    """The sanitizers of one build, in :data:`SANITIZERS` order."""

    sanitizers: tuple[str, ...]

    @property
    def spec(self) -> str:
        """``address,undefined``: what ``-fsanitize=`` takes and a key records."""
        return ",".join(self.sanitizers)

    @property
    def label(self) -> str:
        """``asan``, ``tsan`` or ``ubsan``: the wheel's local version segment, the build
        directories' suffix."""
        if "address" in self.sanitizers:
            return "asan"
        return "tsan" if "thread" in self.sanitizers else "ubsan"

    @property
    def flags(self) -> tuple[str, ...]:
        """What every C and C++ compile and link gets. ``-O0`` after the build type's ``-O3``:
        InfiniLM's tensor/copy.cc took 137 CPU-s to compile with ASan+UBSan at -O3, 60 s at
        -O1, 22.7 s at -O0, 19.7 s plain. The price is a slower instrumented run (InfiniOps'
        suite 5.5 times the plain one's), small beside the compile on the real stack
        (docs/sanitizers.md)."""
        return (f"-fsanitize={self.spec}", "-fno-omit-frame-pointer", "-g", "-O0")

    @property
    def cuda_flags(self) -> tuple[str, ...]:
        """:attr:`flags` for nvcc's host compiler: one ``-fsanitize=`` a sanitizer, since nvcc
        splits ``-Xcompiler``'s value at commas."""
        sanitizers = (f"-fsanitize={s}" for s in self.sanitizers)
        return tuple(f"-Xcompiler={flag}" for flag in (*sanitizers, *self.flags[1:]))

    @property
    def runtimes(self) -> tuple[str, ...]:
        return tuple(RUNTIMES[s] for s in self.sanitizers)


def problem(spec: str) -> str | None:
    """Why ``spec`` is no profile (an unknown sanitizer, with a did-you-mean; ASan with TSan);
    None when it is one (or ``none``)."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        return f"empty sanitizer list (give {SPEC_HELP})"
    if names == ["none"]:
        return None
    for name in names:
        if name not in SANITIZERS:
            close = difflib.get_close_matches(name, SANITIZERS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            return f"unknown sanitizer '{name}'{hint} (give {SPEC_HELP})"
    if "address" in names and "thread" in names:
        return (
            "ASan and TSan cannot be in one build (each owns the shadow memory): "
            "build --sanitize address,undefined and --sanitize thread separately"
        )
    return None


def parse(spec: str | None) -> Profile | None:
    """The profile ``spec`` names; None for none. A bad one is a usage error (exit 2)."""
    if spec is None:
        return None
    why = problem(spec)
    if why is not None:
        raise UsageError(f"--sanitize {spec}: {why}")
    names = {n.strip() for n in spec.split(",") if n.strip()} - {"none"}
    return Profile(tuple(s for s in SANITIZERS if s in names)) if names else None


def cmake_defines(profile: Profile | None, *, cuda: bool) -> dict[str, str]:
    """The cache variables builder/cmake/sanitize.cmake adds as compile and link options
    (CMake lists, one element a flag); the nvcc host flags where the vendor compiles CUDA (it
    sets CMAKE_CUDA_FLAGS_INIT)."""
    if profile is None:
        return {}
    defines = {"INFINI_STACK_SANITIZE_FLAGS": ";".join(profile.flags)}
    if cuda:
        defines["INFINI_STACK_CUDA_SANITIZE_FLAGS"] = ";".join(profile.cuda_flags)
    return defines


def options(profile: Profile, *, cuda: bool) -> dict[str, str]:
    """The ``*SAN_OPTIONS`` a run of sanitized code gets (pure: no library looked up)."""
    env: dict[str, str] = {}
    for sanitizer in profile.sanitizers:
        var, base = OPTIONS[sanitizer]
        extra = (
            *HOST_OPTIONS.get(sanitizer, ()),
            *(CUDA_OPTIONS.get(sanitizer, ()) if cuda else ()),
        )
        env[var] = ":".join((*base, *extra))
    return env


@functools.cache
def runtime_library(compiler: str, name: str) -> Path:
    """The compiler's own ``name`` (``libasan.so``), as ``-print-file-name`` gives it."""
    from builder.core import proc

    found = proc.run([compiler, f"-print-file-name={name}"], check=False, timeout=30)
    path = Path(found.output.strip())
    if found.returncode != 0 or not path.is_absolute() or not path.exists():
        raise BuildError(
            f"{compiler} has no {name}: the sanitizer's runtime cannot be loaded",
            hint="install the compiler's sanitizer runtime (gcc: libasan, libubsan, libtsan)",
        )
    return path.resolve()


# The options variable that reads each sanitizer's suppressions file (ASan's leaks: LSan's).
SUPPRESSION_VARS = {
    "address": "ASAN_OPTIONS",
    "leak": "LSAN_OPTIONS",
    "undefined": "UBSAN_OPTIONS",
    "thread": "TSAN_OPTIONS",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Suppression:
    """One finding in upstream code listed so that a run can go on past it
    (components/sanitizers/suppressions.yaml): never hidden, always with why and where."""

    sanitizer: str  # address, leak, undefined, thread: whose suppressions file it goes in
    kind: str  # that sanitizer's suppression type: race, signed-integer-overflow, leak, ...
    match: str  # the function, source file or library it matches (the sanitizer's syntax)
    upstream: str  # where the finding is upstream: repository file:line
    reason: str

    @property
    def line(self) -> str:
        return f"{self.kind}:{self.match}"


def suppression_files(
    profile: Profile, suppressions: tuple[Suppression, ...], where: Path
) -> dict[str, Path]:
    """The options variable -> the suppressions file written for it under ``where``, for the
    sanitizers of ``profile`` (ASan's includes LSan's)."""
    wanted = {*profile.sanitizers, *(("leak",) if "address" in profile.sanitizers else ())}
    files: dict[str, Path] = {}
    for sanitizer in sorted(wanted):
        entries = [s for s in suppressions if s.sanitizer == sanitizer]
        if not entries:
            continue
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{sanitizer}.supp"
        lines = [f"# {s.upstream}: {s.reason}\n{s.line}" for s in entries]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[SUPPRESSION_VARS[sanitizer]] = path
    return files


def run_env(
    profile: Profile | None,
    compiler: str,
    base: Mapping[str, str],
    *,
    cuda: bool = False,
    suppressions: Mapping[str, Path] | None = None,
) -> dict[str, str]:
    """``base`` with what running ``profile``'s code needs: its runtime preloaded (before
    anything ``base`` preloads), its options and ``suppressions`` (options variable -> file,
    :func:`suppression_files`), then any options the user set (theirs win)."""
    env = dict(base)
    if profile is None:
        return env
    preload = [str(runtime_library(compiler, name)) for name in profile.runtimes]
    env["LD_PRELOAD"] = ":".join([*preload, *filter(None, [base.get("LD_PRELOAD")])])
    ours = options(profile, cuda=cuda)
    for var, path in (suppressions or {}).items():
        ours[var] = ":".join(filter(None, [ours.get(var), f"suppressions={path}"]))
    for var, value in ours.items():
        env[var] = ":".join(filter(None, [value, base.get(var)]))
    return env


def env_for_tests(
    profile: Profile | None,
    compiler: str,
    base: Mapping[str, str],
    *,
    suppressions: Mapping[str, Path] | None = None,
) -> dict[str, str]:
    """:func:`run_env` for a component's own test command (ctest, a script), which may build
    as well as run: InfiniRT's ``test_install_consumer`` configures and compiles a consumer of
    the installed library with CMake, then runs it. What a test compiles gets the profile's
    flags (``CFLAGS``, ``CXXFLAGS``, ``LDFLAGS``, which CMake reads when it configures), so it
    carries its sanitizer's runtime as an instrumented executable does. Under TSan nothing is
    preloaded: TSan in CMake (ctest, ``cmake -P``) deadlocks it, holding the child's SIGCHLD back
    while CMake's event loop waits for it. A program a test compiles by calling the compiler
    itself (InfiniRT's consumer) then gets TSan's runtime only as its library's dependency
    (docs/sanitizers.md)."""
    env = run_env(profile, compiler, base, suppressions=suppressions)
    if profile is None:
        return env
    for var in ("CFLAGS", "CXXFLAGS", "LDFLAGS"):
        env[var] = " ".join(filter(None, [*profile.flags, base.get(var)]))  # the user's win
    if "thread" in profile.sanitizers:
        env.pop("LD_PRELOAD")
        if base.get("LD_PRELOAD"):
            env["LD_PRELOAD"] = base["LD_PRELOAD"]
    return env


def refuse_release(profile: Profile | None) -> None:
    """A sanitized build is for local testing only: its wheel needs the sanitizer's runtime
    preloaded and is never released (``--sanitize none`` releases a stack.yaml that asks for
    one)."""
    if profile is not None:
        raise UsageError(
            f"a release is never sanitized ({profile.spec}): its wheel would need the "
            "sanitizer's runtime preloaded",
            hint="build a sanitized wheel with `wheel --sanitize` for local testing; release "
            "without --sanitize (or with --sanitize none over stack.yaml's sanitize:)",
        )
