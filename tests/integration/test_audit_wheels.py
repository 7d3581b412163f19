"""The audit on real wheels built with gcc: each wheel breaks one rule and must fail for it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.wheelmaker import Corpus, corpus, have_gcc, make_wheel
from wheels.audit import audit_wheel
from wheels.audit.members import MemberScan
from wheels.audit_report import WheelAudit, render_text, to_json
from wheels.policy import load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return corpus(tmp_path_factory.mktemp("audit-corpus"))


def audit(path: Path, vendor: str = "cpu") -> WheelAudit:
    return audit_wheel(path, load_vendor_policy(vendor))


def codes(result: WheelAudit) -> set[str]:
    return {f.code for f in result.violations}


def test_clean_wheel_passes_and_resolves_its_bundled_library_through_runpath(
    wheels: Corpus,
) -> None:
    result = audit(wheels["clean"])
    assert result.ok, render_text([result])
    ext = next(e for e in result.elfs if e.kind == "extension")
    need = next(n for n in ext.needs if n.soname == "libhelper.so")
    assert (need.kind, need.where) == ("wheel", "demo/lib/libhelper.so")
    assert ext.symbols.missing == () and ext.symbols.python == 1
    assert result.tag == result.auditwheel_tag == "manylinux_2_5_x86_64"


def test_a_build_directory_after_the_resolving_runpath_entry_is_a_warning(
    wheels: Corpus,
) -> None:
    """``$ORIGIN/lib:/build/dir``: the loader finds libhelper.so in the first entry and never
    reaches the second (the RUNPATH order rule; tests/integration/test_audit_runpath_order.py
    holds the shape where the outside entry comes first, a violation)."""
    result = audit(wheels["build_dir_runpath"])
    assert not [f for f in result.violations if f.code == "runpath"]
    (leak,) = [f for f in result.warnings if f.code == "runpath"]
    assert "absolute directory outside the wheel" in leak.message
    assert (
        "comes after every entry that resolves a need of this file (libhelper.so)" in leak.message
    )
    assert leak.member and leak.member.startswith("demo/_core")


def test_libpython_in_dt_needed_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["libpython_needed"])
    assert "libpython" in codes(result)
    ext = next(e for e in result.elfs if e.kind == "extension")
    assert any(n.kind == "libpython" for n in ext.needs)


def test_statically_linked_interpreter_symbols_are_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["static_python"])
    (finding,) = [f for f in result.violations if f.code == "static-libpython"]
    assert "Py_Initialize" in finding.message and "_Py_Something" in finding.message


def test_extension_without_its_pyinit_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["no_pyinit"])
    (finding,) = [f for f in result.violations if f.code == "no-pyinit"]
    assert "PyInit__wrong" in finding.message


def test_missing_library_is_a_violation_naming_elf_and_library(wheels: Corpus) -> None:
    result = audit(wheels["missing_library"])
    (finding,) = [f for f in result.violations if f.code == "unresolved"]
    assert "libhelper.so" in finding.message
    assert finding.member and finding.member.startswith("demo/_core")


def test_symbol_the_bundled_library_lacks_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["undefined_symbol"])
    (finding,) = [f for f in result.violations if f.code == "undefined-symbol"]
    assert "helper_old" in finding.message


def test_library_from_declared_distribution_passes(wheels: Corpus) -> None:
    result = audit(wheels["distribution_declared"], "nvidia")
    assert result.ok, render_text([result])
    rt = next(e for e in result.elfs if e.member == "demo/lib/libinfinirt.so")
    need = next(n for n in rt.needs if n.soname == "libcudart.so.13")
    assert need.kind == "distribution" and "nvidia-cuda-runtime" in (need.where or "")


def test_library_from_undeclared_distribution_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["distribution_undeclared"], "nvidia")
    (finding,) = [f for f in result.violations if f.code == "requires-dist"]
    assert "nvidia-cuda-runtime" in finding.message and "libcudart.so.13" in finding.message


def test_distribution_library_without_a_runpath_to_it_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["distribution_unreached"], "nvidia")
    (finding,) = [f for f in result.violations if f.code == "unresolved"]
    assert "nvidia/cu13/lib" in finding.message


def test_only_the_library_whose_own_runpath_misses_a_distribution_library_is_blamed(
    wheels: Corpus,
) -> None:
    """libops.so (no RUNPATH) and libinfinirt.so (RUNPATH to nvidia/cu13/lib) both need
    libcudart.so.13, loaded in that order by one extension: libops.so's failed search does
    not make libinfinirt.so's fail too."""
    result = audit(wheels["distribution_unreached_by_one"], "nvidia")
    (finding,) = [f for f in result.violations if f.code == "unresolved"]
    assert finding.member == "demo/lib/libops.so" and "nvidia/cu13/lib" in finding.message
    rt = next(e for e in result.elfs if e.member == "demo/lib/libinfinirt.so")
    need = next(n for n in rt.needs if n.soname == "libcudart.so.13")
    assert need.kind == "distribution" and "nvidia-cuda-runtime" in (need.where or "")


def test_library_at_the_top_of_site_packages_resolves_to_its_declared_distribution(
    wheels: Corpus,
) -> None:
    result = audit(wheels["site_root_declared"], "nvidia")
    lib = next(e for e in result.elfs if e.member == "demo/lib/libops.so")
    need = next(n for n in lib.needs if n.soname.startswith("flash_attn_2_cuda"))
    assert need.kind == "distribution"
    assert need.where == "flash-attn: flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"
    assert "unresolved" not in codes(result) and "requires-dist" not in codes(result)
    undeclared = audit(wheels["site_root_undeclared"], "nvidia")
    (finding,) = [f for f in undeclared.violations if f.code == "requires-dist"]
    assert "flash-attn" in finding.message


def test_same_wheel_under_cpu_policy_treats_cudart_as_missing(wheels: Corpus) -> None:
    result = audit(wheels["distribution_declared"], "cpu")
    assert "unresolved" in codes(result)


def test_driver_library_is_external_for_nvidia_and_its_symbols_not_passed_silently(
    wheels: Corpus,
) -> None:
    result = audit(wheels["driver_external"], "nvidia")
    assert result.ok, render_text([result])
    rt = next(e for e in result.elfs if e.member == "demo/lib/libinfinirt.so")
    need = next(n for n in rt.needs if n.soname == "libcuda.so.1")
    assert need.kind == "external"
    assert need.where is not None or rt.symbols.unverified == ("cuInit",)


def test_tampered_record_hash_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["tampered_record"])
    (finding,) = [f for f in result.violations if f.code == "record-hash"]
    assert finding.member == "demo/lib/libhelper.so"


def test_dotdot_member_is_a_violation(wheels: Corpus) -> None:
    assert "dotdot-name" in codes(audit(wheels["dotdot_member"]))


def test_duplicate_member_is_a_violation(wheels: Corpus) -> None:
    assert "duplicate" in codes(audit(wheels["duplicate_member"]))


def test_symlink_member_is_a_violation(wheels: Corpus) -> None:
    assert "symlink" in codes(audit(wheels["symlink_member"]))


def test_tag_claiming_older_glibc_than_symbols_allow_is_a_violation(wheels: Corpus) -> None:
    result = audit(wheels["overclaimed_tag"])
    (finding,) = [f for f in result.violations if f.code == "platform-tag"]
    assert "manylinux_2_17_x86_64" in finding.message and "GLIBC_2.34" in finding.message


def test_honest_manylinux_tag_passes(wheels: Corpus) -> None:
    result = audit(wheels["honest_manylinux"])
    assert result.ok, render_text([result])


def test_truncated_elf_member_is_a_located_finding(wheels: Corpus) -> None:
    result = audit(wheels["truncated_elf"])
    (finding,) = [f for f in result.violations if f.code == "bad-elf"]
    assert (
        finding.member == "demo/lib/libbroken.so"
        and str(wheels["truncated_elf"]) in finding.location
    )


def test_text_named_like_a_library_is_reported(wheels: Corpus) -> None:
    result = audit(wheels["garbage_so"])
    assert any(f.code == "not-elf" and f.member == "demo/lib/libtext.so" for f in result.findings)


def test_zip_that_is_not_a_wheel_is_a_violation(wheels: Corpus) -> None:
    assert "no-dist-info" in codes(audit(wheels["zip_not_wheel"]))


def test_cli_exits_6_on_violations_and_prints_violations_first(
    wheels: Corpus,
    cli,
    home: Path,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("audit", wheels["clean"], wheels["missing_library"])
    assert result.code == 6
    text = result.out.split("\n\n")[1]
    lines = text.splitlines()
    first_violation = next(i for i, line in enumerate(lines) if "violation:" in line)
    first_elf = next(i for i, line in enumerate(lines) if "[extension" in line)
    assert first_violation < first_elf


def test_cli_json_has_the_full_graph_and_exit_0_when_clean(
    wheels: Corpus,
    cli,
    home: Path,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("audit", "--json", wheels["clean"])
    assert result.code == 0, result.out
    data = json.loads(result.out)
    (wheel,) = data["wheels"]
    needs = {e["member"]: e["needs"] for e in wheel["elfs"]}
    core = next(v for k, v in needs.items() if k.startswith("demo/_core"))
    assert {"soname": "libhelper.so", "kind": "wheel", "where": "demo/lib/libhelper.so"} in core


def test_cli_json_symbols_lists_defined_and_undefined_names(
    wheels: Corpus,
    cli,
    home: Path,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("audit", "--json", "--symbols", wheels["clean"])
    elfs = {e["member"]: e for e in json.loads(result.out)["wheels"][0]["elfs"]}
    assert "helper" in elfs["demo/lib/libhelper.so"]["symbol_names"]["defined"]
    core = next(v for k, v in elfs.items() if k.startswith("demo/_core"))
    assert {"helper", "PyLong_FromLong"} <= set(core["symbol_names"]["undefined"])


def test_vendor_is_inferred_from_local_version(
    wheels: Corpus,
    cli,
    home: Path,  # type: ignore[no-untyped-def]
) -> None:
    result = cli("audit", "--json", wheels["distribution_declared"])
    assert json.loads(result.out)["wheels"][0]["vendor"] == "nvidia"


def test_warm_cache_gives_the_same_verdict_as_cold(wheels: Corpus, tmp_path: Path) -> None:
    policy = load_vendor_policy("cpu")
    cold = audit_wheel(wheels["undefined_symbol"], policy, cache_dir=tmp_path)
    warm = audit_wheel(wheels["undefined_symbol"], policy, cache_dir=tmp_path)
    assert warm.stats.cached_batches == warm.stats.batches > 0
    assert cold.stats.cached_batches == 0
    assert to_json([warm])["wheels"][0]["violations"] == to_json([cold])["wheels"][0]["violations"]


def _parallel_equals_serial(wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit of ``wheel`` on two processes, a batch per member, is the serial one."""
    from wheels.audit import pool

    policy = load_vendor_policy("cpu")
    serial = audit_wheel(wheel, policy, workers=1)
    monkeypatch.setattr(pool, "SERIAL_BELOW", 0)
    monkeypatch.setattr(pool, "REST_ALONE", 0)
    monkeypatch.setattr(pool, "BATCH_BYTES", 1)
    parallel = audit_wheel(wheel, policy, workers=2)
    assert parallel.stats.batches > 2, [f.line() for f in parallel.findings]
    assert not any(f.code == "internal" for f in parallel.findings)
    assert to_json([parallel])["wheels"][0]["elfs"] == to_json([serial])["wheels"][0]["elfs"]
    assert [f.line() for f in parallel.findings] == [f.line() for f in serial.findings]


def test_parallel_scan_equals_serial_scan(wheels: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    _parallel_equals_serial(wheels["undefined_symbol"], monkeypatch)


_REAL: dict[str, Any] = {}  # the test's process and pool._run_batch, for _dies_in_a_child


def _dies_in_a_child(*args: Any, **kwargs: Any) -> Any:
    """pool._run_batch, but a child forked while this stands in for it ends at once."""
    import os

    if os.getpid() != _REAL["pid"]:
        os._exit(9)
    return _REAL["run_batch"](*args, **kwargs)


def test_a_batch_whose_child_dies_is_read_here_and_the_audit_is_the_same(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from wheels.audit import pool

    monkeypatch.setitem(_REAL, "pid", os.getpid())
    monkeypatch.setitem(_REAL, "run_batch", pool._run_batch)
    monkeypatch.setattr(pool, "_run_batch", _dies_in_a_child)
    _parallel_equals_serial(wheels["undefined_symbol"], monkeypatch)


def test_with_another_thread_running_the_scan_starts_its_children_without_fork_alone(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    from concurrent.futures import ProcessPoolExecutor

    from wheels.audit import pool

    made: list[object] = []
    new_pool = pool._new_pool
    monkeypatch.setattr(pool, "_new_pool", lambda n: made.append(new_pool(n)) or made[-1])
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        _parallel_equals_serial(wheels["undefined_symbol"], monkeypatch)
    finally:
        stop.set()
        thread.join()
    assert made and all(isinstance(p, ProcessPoolExecutor) for p in made)


def _children_per_member(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the tests' small wheels take the path of a big one on two cores: children forked
    before the directory is read, a batch per member."""
    from wheels.audit import pool

    for name in ("SERIAL_BELOW", "EARLY_ABOVE", "HASH_THREAD_ABOVE", "REST_ALONE"):
        monkeypatch.setattr(pool, name, 0)
    monkeypatch.setattr(pool, "BATCH_BYTES", 1)
    monkeypatch.setattr(pool, "BESIDE_RATIO", 1 << 40)  # no member dwarfs the rest


def test_a_member_read_in_a_child_still_catches_a_tampered_record(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = load_vendor_policy("cpu")
    serial = audit_wheel(wheels["tampered_record"], policy, workers=1)
    _children_per_member(monkeypatch)
    parallel = audit_wheel(wheels["tampered_record"], policy, workers=2)
    (finding,) = [f for f in parallel.violations if f.code == "record-hash"]
    assert finding.member == "demo/lib/libhelper.so"
    assert [f.line() for f in parallel.findings] == [f.line() for f in serial.findings]


def _scanned_early(path: Path) -> tuple[dict[int, str | None], list[MemberScan]]:
    """The digests a serial scan makes, then the scans of a parallel one whose child took the
    largest member before the directory was read."""
    from wheels.audit import pool
    from wheels.audit.directory import read_directory
    from wheels.audit.raw import task_for

    tasks = [task_for(i, info, "sha256") for i, info in enumerate(read_directory(path))]
    serial = {s.index: s.digest for s in pool.scan_members(path, tasks, None, 1)[0]}
    children = pool.start_children(path, 2, None)
    assert children is not None and children.first is not None  # the largest, handed out early
    scans, _, _ = pool.scan_members(path, tasks, None, 2, children=children)
    return serial, scans


def test_a_scan_whose_child_took_the_largest_member_early_makes_every_digest(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    _children_per_member(monkeypatch)
    serial, scans = _scanned_early(wheels["tampered_record"])
    assert all(s.read_error is None for s in scans)
    assert {s.index: s.digest for s in scans} == serial


def test_a_largest_member_that_dwarfs_the_rest_is_hashed_beside(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members, pool

    path = wheels["tampered_record"]
    _children_per_member(monkeypatch)
    monkeypatch.setattr(pool, "BESIDE_RATIO", 0)  # the largest member dwarfs the rest
    monkeypatch.setattr(members, "HASH_THREAD_ABOVE", 0)
    monkeypatch.setattr(members, "SPARSE_ABOVE", 0)  # and is kept only where it is read
    serial, scans = _scanned_early(path)
    assert {s.index: s.digest for s in scans} == serial
    policy = load_vendor_policy("cpu")
    beside = audit_wheel(path, policy, workers=2)
    monkeypatch.undo()
    assert [f.line() for f in beside.findings] == [
        f.line() for f in audit_wheel(path, policy, workers=1).findings
    ]


def test_the_largest_member_is_hashed_beside_only_when_the_rest_would_leave_a_core_idle() -> None:
    from wheels.audit.pool import hashes_beside

    mb = 1 << 20
    assert hashes_beside(516 * mb, 52 * mb, 13)  # cuBLAS 13.1: libcublasLt and little else
    assert hashes_beside(239 * mb, 0, 11)  # NCCL: one library
    assert not hashes_beside(414 * mb, 252 * mb, 12_247)  # torch CPU: 12,000 more members
    assert not hashes_beside(543 * mb, 432 * mb, 30)  # cuDNN 9.1: other big libraries
    assert not hashes_beside(40 * mb, 0, 3)  # too small to be worth a thread


def test_a_small_wheel_whose_largest_member_a_child_took_early_gets_the_same_audit(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import pool

    policy = load_vendor_policy("cpu")
    serial = audit_wheel(wheels["undefined_symbol"], policy, workers=1)
    monkeypatch.setattr(pool, "EARLY_ABOVE", 0)  # children forked, the largest member handed out
    monkeypatch.setattr(pool, "BATCH_BYTES", 1)  # (its own batch) though the wheel is small
    monkeypatch.setattr(pool, "REST_ALONE", 0)  # (and the rest of it smaller still)
    taken: list[pool.Children | None] = []
    start = pool.start_children

    def spy(*args: Any) -> pool.Children | None:
        taken.append(start(*args))
        return taken[-1]

    monkeypatch.setattr("wheels.audit.core.start_children", spy)
    early = audit_wheel(wheels["undefined_symbol"], policy, workers=2)
    (children,) = taken
    assert children is not None and children.first is not None and children.first[1].done()
    assert [f.line() for f in early.findings] == [f.line() for f in serial.findings]
    assert to_json([early])["wheels"][0]["elfs"] == to_json([serial])["wheels"][0]["elfs"]


def _run_batch_noted(*args: Any, **kwargs: Any) -> Any:
    """pool._run_batch, noting in this (the test's) process the members of each batch it reads
    here, in order; a child reads as before, after a pause: the test's members are so small
    that a child could otherwise be done with the largest before this process hands out the
    next batch, and take that one too (as it should, being free)."""
    import os
    import time

    if os.getpid() == _REAL["pid"]:
        _REAL["read_here"].append([t.name for t in args[1]])
    else:
        time.sleep(0.5)
    return _REAL["run_batch"](*args, **kwargs)


@pytest.mark.parametrize("long_above", [0, 1 << 40])
def test_a_second_long_member_is_read_here_first_and_the_audit_is_the_same(
    wheels: Corpus, monkeypatch: pytest.MonkeyPatch, long_above: int
) -> None:
    """With a child on the largest member, this process takes the next largest first when it is
    a long one (SPARSE_ABOVE bytes or more), and the small ones after; otherwise the smallest
    first, as before. The audit is the serial one either way."""
    import os

    from wheels.audit import pool
    from wheels.audit.directory import read_directory
    from wheels.audit.raw import task_for

    path = wheels["undefined_symbol"]
    policy = load_vendor_policy("cpu")
    serial = audit_wheel(path, policy, workers=1)
    for name in ("SERIAL_BELOW", "EARLY_ABOVE", "REST_ALONE"):
        monkeypatch.setattr(pool, name, 0)
    monkeypatch.setattr(pool, "BATCH_BYTES", 1)  # a batch per member
    monkeypatch.setattr(pool, "SPARSE_ABOVE", long_above)
    monkeypatch.setitem(_REAL, "pid", os.getpid())
    monkeypatch.setitem(_REAL, "run_batch", pool._run_batch)
    monkeypatch.setitem(_REAL, "read_here", [])
    monkeypatch.setattr(pool, "_run_batch", _run_batch_noted)
    parallel = audit_wheel(path, policy, workers=2)
    tasks = [task_for(i, info, "sha256") for i, info in enumerate(read_directory(path))]
    batches = [[t.name for t in batch] for batch in pool._batches(tasks)]  # largest first
    assert len(batches) > 3 and len(batches[1]) == 1
    assert _REAL["read_here"][0] == batches[1 if long_above == 0 else -1], batches
    assert [f.line() for f in parallel.findings] == [f.line() for f in serial.findings]
    assert to_json([parallel])["wheels"][0]["elfs"] == to_json([serial])["wheels"][0]["elfs"]


def test_a_wheel_that_is_one_big_member_and_little_else_is_read_without_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import pool

    big = os.urandom(pool.EARLY_ABOVE + (1 << 20))  # (forked early, were it worth it)
    wheel = make_wheel(tmp_path, {"demo/__init__.py": b"", "demo/data.bin": big})
    policy = load_vendor_policy("cpu")
    started: list[int] = []
    new_pool = pool._new_pool
    monkeypatch.setattr(pool, "_new_pool", lambda n: started.append(n) or new_pool(n))
    monkeypatch.setattr(pool, "SERIAL_BELOW", 0)
    alone = audit_wheel(wheel, policy, workers=2)
    assert started == [] and alone.ok
    monkeypatch.setattr(pool, "REST_ALONE", 0)
    helped = audit_wheel(wheel, policy, workers=2)
    assert started == [1] and helped.findings == alone.findings
