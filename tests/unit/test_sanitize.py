"""Sanitizer profiles planned (no compiler): flags, keys, build directories, options, the
reports read back, the wheel's local version, and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import UsageError
from builder.core.sanitize import Profile, env_for_tests, options, parse, problem, run_env
from builder.core.sanitizer_findings import findings
from builder.plan import to_json
from tests.planning import CUDA, ROOT, defines, plan_for
from wheels.naming import sanitized_local, sanitizer_of_wheel

ASAN = parse("address,undefined")
TSAN = parse("thread")


def test_profiles_compile_with_the_sanitizer_frame_pointers_and_debug_info() -> None:
    assert parse("address,undefined") == Profile(("address", "undefined"))
    assert ASAN.flags == ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g", "-O0")
    assert TSAN is not None and TSAN.flags[0] == "-fsanitize=thread"
    assert ASAN.cuda_flags[:2] == (
        "-Xcompiler=-fsanitize=address",
        "-Xcompiler=-fsanitize=undefined",
    )
    assert (ASAN.label, TSAN.label) == ("asan", "tsan")
    assert parse("undefined,address") == ASAN  # one spelling, whatever the order
    assert parse("none") is None and parse(None) is None


def test_asan_with_tsan_and_unknown_names_are_usage_errors() -> None:
    with pytest.raises(UsageError) as both:
        parse("address,thread")
    assert (
        both.value.exit_code == 2 and "ASan and TSan cannot be in one build" in both.value.message
    )
    assert "did you mean 'address'" in (problem("adress") or "")
    assert problem("") is not None


def test_runs_halt_on_the_first_report_with_the_options_of_their_host() -> None:
    assert ASAN is not None and TSAN is not None
    cpu = options(ASAN, cuda=False)
    assert cpu["UBSAN_OPTIONS"] == "halt_on_error=1:print_stacktrace=1"
    # The runtime is preloaded into hosts not built with it (Python, ctest, mpirun).
    assert "detect_leaks=0" in cpu["ASAN_OPTIONS"]
    assert "protect_shadow_gap=0" not in cpu["ASAN_OPTIONS"]
    assert "protect_shadow_gap=0" in options(ASAN, cuda=True)["ASAN_OPTIONS"]
    assert set(options(TSAN, cuda=False)) == {"TSAN_OPTIONS"}


def test_a_test_command_builds_with_the_profile_and_tsan_is_kept_out_of_cmake() -> None:
    base = {"CXXFLAGS": "-O2", "LD_PRELOAD": "/opt/mine.so"}
    asan = env_for_tests(parse("address,undefined"), "g++", base)
    # What a test compiles (a consumer CMake configures) is instrumented, the user's flags last.
    assert asan["CXXFLAGS"] == "-fsanitize=address,undefined -fno-omit-frame-pointer -g -O0 -O2"
    assert (
        asan["LDFLAGS"]
        == asan["CFLAGS"]
        == "-fsanitize=address,undefined -fno-omit-frame-pointer -g -O0"
    )
    assert asan["LD_PRELOAD"] == run_env(parse("address,undefined"), "g++", base)["LD_PRELOAD"]
    assert "libasan.so" in asan["LD_PRELOAD"]
    # TSan preloaded into CMake deadlocks it: only what the user preloads stays.
    tsan = env_for_tests(parse("thread"), "g++", base)
    assert tsan["LD_PRELOAD"] == "/opt/mine.so"
    assert "LD_PRELOAD" not in env_for_tests(parse("thread"), "g++", {})
    assert tsan["CXXFLAGS"].startswith("-fsanitize=thread ")
    assert tsan["TSAN_OPTIONS"].startswith("halt_on_error=1")
    assert env_for_tests(None, "g++", base) == base


def test_the_profile_is_part_of_every_key_and_of_the_build_directory() -> None:
    plain, asan, tsan = (plan_for("cpu", sanitize=p) for p in (None, ASAN, TSAN))
    for name in ("infinirt", "infinilm"):
        keys = {p.get(name).key for p in (plain, asan, tsan)}
        assert len(keys) == 3
        assert "sanitize" not in plain.get(name).key_inputs  # plain keys stay as they were
    assert plain.get("infinirt").key == plan_for("cpu").get("infinirt").key
    rt = defines(asan, "infinirt")
    assert rt["INFINI_STACK_SANITIZE_FLAGS"] == "-fsanitize=address,undefined;" + (
        "-fno-omit-frame-pointer;-g;-O0"
    )
    assert "INFINI_STACK_CUDA_SANITIZE_FLAGS" not in rt  # cpu compiles no CUDA
    assert to_json(asan)["sanitize"] == "address,undefined"


def test_a_path_source_builds_sanitized_in_a_directory_of_its_own() -> None:
    mini = ROOT / "examples" / "mini-stack"
    plain = plan_for("cpu", root=mini).get("minirt").build_dir
    asan = plan_for("cpu", root=mini, sanitize=ASAN).get("minirt").build_dir
    assert plain != asan and "cpu-asan" in asan.name


def test_nvidia_plan_gives_nvcc_the_host_flags_through_xcompiler() -> None:
    rt = defines(plan_for("nvidia", CUDA, sanitize=ASAN), "infinirt")
    # One -fsanitize= a sanitizer: nvcc splits -Xcompiler's value at commas.
    assert rt["INFINI_STACK_CUDA_SANITIZE_FLAGS"].split(";") == [
        "-Xcompiler=-fsanitize=address",
        "-Xcompiler=-fsanitize=undefined",
        "-Xcompiler=-fno-omit-frame-pointer",
        "-Xcompiler=-g",
        "-Xcompiler=-O0",
    ]


def test_cli_plan_shows_the_nvcc_host_flags(cli) -> None:  # type: ignore[no-untyped-def]
    mini = ROOT / "examples" / "mini-stack" / "stack.yaml"
    result = cli("plan", "-m", mini, "-V", "nvidia", "--sanitize", "address,undefined")
    assert result.code == 0, result.err
    assert "-Xcompiler=-fsanitize=address;-Xcompiler=-fsanitize=undefined" in result.out


@pytest.mark.parametrize("command", ["build", "wheel", "plan"])
def test_cli_refuses_asan_with_tsan_with_exit_2(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(command, "-V", "cpu", "--sanitize", "address,thread")
    assert result.code == 2
    assert "ASan and TSan cannot be in one build" in result.err
    assert "Traceback" not in result.err


def test_release_refuses_a_sanitized_build(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("release", "-V", "cpu", "--sanitize", "address,undefined", "-o", tmp_path / "r")
    assert result.code == 2
    assert "a release is never sanitized" in result.err
    assert not (tmp_path / "r").exists()


def test_stack_yaml_sanitize_key_is_validated_with_a_did_you_mean(tmp_path: Path) -> None:
    from builder.core.errors import ManifestError
    from builder.manifest.loader import load_stack

    mini = ROOT / "examples" / "mini-stack"
    text = (
        (mini / "stack.yaml")
        .read_text()
        .replace("  cpu:\n", "  cpu:\n    sanitize: adress,undefined\n", 1)
    )
    manifest = tmp_path / "stack.yaml"
    manifest.write_text(text.replace("recipes: components", f"recipes: {mini / 'components'}"))
    for part in ("rt", "ops", "ccl", "engine"):
        (tmp_path / part).symlink_to(mini / part)
    (tmp_path / "components").symlink_to(mini / "components")
    with pytest.raises(ManifestError) as error:
        load_stack(manifest)
    assert "stack.yaml:" in error.value.message
    assert "did you mean 'address'" in error.value.message
    ok = manifest.read_text().replace("adress", "address")
    manifest.write_text(ok)
    assert load_stack(manifest).vendors["cpu"].sanitize == "address,undefined"


def test_sanitized_wheels_say_so_in_their_local_version() -> None:
    assert sanitized_local("cpu", "asan") == "cpu.asan"
    assert sanitized_local("cu130.torch2.11", "tsan") == "cu130.torch2.11.tsan"
    assert sanitized_local("cpu", None) == "cpu"
    assert sanitizer_of_wheel("infini_mini-0.1.0+cpu.asan-cp311-cp311-linux_x86_64.whl") == (
        "address,undefined"
    )
    assert sanitizer_of_wheel("infini_mini-0.1.0+cu130.tsan-cp311-cp311-linux_x86_64.whl") == (
        "thread"
    )
    assert sanitizer_of_wheel("infini_mini-0.1.0+cpu-cp311-cp311-linux_x86_64.whl") is None


ASAN_REPORT = """\
=================================================================
==123==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020000001a at pc 0x1 bp 0x2
READ of size 1 at 0x602000000001a thread T0
    #0 0x5566583ce774 in heap_buffer_overflow /infini-stack/src/bugs/bugs.cpp:17
    #1 0x5566583ce774 in main /infini-stack/src/bugs/bugs.cpp:57

0x60200000001a is located 0 bytes to the right of 10-byte region
allocated by thread T0 here:
    #0 0x7f in malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69

SUMMARY: AddressSanitizer: heap-buffer-overflow /infini-stack/src/bugs/bugs.cpp:17 in main
"""
UBSAN_REPORT = """\
/src/bugs.cpp:31:20: runtime error: signed integer overflow: 2147483647 + 1 cannot be represented
    #0 0x5648bc8e8886 in signed_integer_overflow /infini-stack/src/bugs/bugs.cpp:31
"""
TSAN_REPORT = """\
==================
WARNING: ThreadSanitizer: data race (pid=42)
  Write of size 4 at 0x7b0400000000 by thread T2:
    #0 bump /infini-stack/src/bugs/bugs.cpp:39 (bugs+0x150e)

  Previous write of size 4 at 0x7b0400000000 by thread T1:
    #0 bump /infini-stack/src/bugs/bugs.cpp:39 (bugs+0x150e)

SUMMARY: ThreadSanitizer: data race /infini-stack/src/bugs/bugs.cpp:39 in bump()
"""


def test_reports_are_read_back_with_kind_place_and_the_first_stack() -> None:
    asan, ubsan, tsan = findings(ASAN_REPORT + "other output\n" + UBSAN_REPORT + TSAN_REPORT)
    assert (asan.sanitizer, asan.kind, asan.where) == (
        "address",
        "heap-buffer-overflow",
        "/infini-stack/src/bugs/bugs.cpp:17",
    )
    assert len(asan.frames) == 2  # the allocation's stack is not the error's
    assert (ubsan.sanitizer, ubsan.kind, ubsan.where) == (
        "undefined",
        "signed integer overflow",
        "/src/bugs.cpp:31:20",
    )
    assert (tsan.kind, tsan.where, len(tsan.frames)) == (
        "data race",
        "/infini-stack/src/bugs/bugs.cpp:39",
        1,
    )
    assert asan.lines()[0] == "address: heap-buffer-overflow at /infini-stack/src/bugs/bugs.cpp:17"
    assert findings("all tests passed\n") == []


# A child of the runtime check under ASan (InfiniLM's embedding op on the CPU), its output
# quoted as the check quotes a child's: each line after "| ".
QUOTED_SEGV = """\
child op op=embedding: exit status 1 in 11.7s, its output:
| AddressSanitizer:DEADLYSIGNAL
| =================================================================
| ==9794==ERROR: AddressSanitizer: SEGV on unknown address (pc 0x7f3ed9897b26 T0)
| ==9794==The signal is caused by a READ memory access.
|     #0 0x7f3ed9897b26 in graph::Op::~Op() /infini-stack/src/lm/graph.cc:147
|     #1 0x7f3ed9b951c1 in op::Embedding::Embedding() /infini-stack/src/lm/embedding.cc:11
|
| AddressSanitizer can not provide additional info.
| SUMMARY: AddressSanitizer: SEGV /infini-stack/src/lm/graph.cc:147 in graph::Op::~Op()
| ==9794==ABORTING
"""


def test_a_report_in_a_child_s_quoted_output_keeps_its_place_and_frames() -> None:
    (segv,) = findings(QUOTED_SEGV)
    assert (segv.sanitizer, segv.kind, segv.where) == (
        "address",
        "SEGV",
        "/infini-stack/src/lm/graph.cc:147",
    )
    assert [f.split(" in ")[1] for f in segv.frames] == [
        "graph::Op::~Op() /infini-stack/src/lm/graph.cc:147",
        "op::Embedding::Embedding() /infini-stack/src/lm/embedding.cc:11",
    ]
