"""Archive-level checks (RECORD, names, metadata) and robustness against mangled zips."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wheelmaker import Breakage, make_wheel
from wheels.audit import audit_wheel
from wheels.audit.archive import Headers
from wheels.audit_report import WheelAudit, render_text, to_json
from wheels.policy import load_vendor_policy

CPU = load_vendor_policy("cpu")
PURE = {"demo/__init__.py": b"VALUE = 1\n", "demo/data.txt": b"hello\n" * 50}


def system_library(name: str) -> Path | None:
    """``name`` from the system library directory (Debian's or Red Hat's), None if absent."""
    return next(
        (
            d / name
            for d in (Path("/lib/x86_64-linux-gnu"), Path("/usr/lib64"))
            if (d / name).exists()
        ),
        None,
    )


PTHREAD = system_library("libpthread.so.0")


def violations(result: WheelAudit) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for f in result.violations:
        out.setdefault(f.code, []).append(f.member)
    return out


def test_consistent_wheel_without_elf_files_passes(tmp_path: Path) -> None:
    result = audit_wheel(make_wheel(tmp_path, PURE, tag="py3-none-any"), CPU)
    assert result.ok, render_text([result])
    assert result.elfs == ()


def test_record_hash_mismatch_names_the_member(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, PURE, breakage=Breakage(tamper_record="demo/data.txt"))
    assert violations(audit_wheel(wheel, CPU)) == {"record-hash": ["demo/data.txt"]}


def test_member_missing_from_record_is_a_violation(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, PURE, breakage=Breakage(extra_members={"demo/sneaky.py": b""}))
    assert violations(audit_wheel(wheel, CPU)) == {"record": ["demo/sneaky.py"]}


def test_record_size_mismatch_is_a_violation(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, PURE)
    rewritten = tmp_path / "out" / wheel.name
    rewritten.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(rewritten, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("RECORD"):
                data = data.replace(b",300\n", b",301\n")  # demo/data.txt: 300 bytes
            dst.writestr(info, data)
    assert violations(audit_wheel(rewritten, CPU)) == {"record-size": ["demo/data.txt"]}


def test_wheel_without_record_is_a_violation(tmp_path: Path) -> None:
    target = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as zf:
        zf.writestr("demo/__init__.py", b"")
        zf.writestr("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\n")
    found = violations(audit_wheel(target, CPU))
    assert found["missing-metadata"] == ["demo-1.0.dist-info/RECORD"]


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_metadata_that_does_not_match_its_crc_is_unreadable(tmp_path: Path, method: int) -> None:
    target = tmp_path / "demo-1.0-py3-none-any.whl"
    metadata = b"Name: demo\nVersion: 1.0\nSummary: " + b"s" * 64 + b"\n"
    with zipfile.ZipFile(target, "w", method) as zf:
        zf.writestr("demo/__init__.py", b"")
        zf.writestr("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("demo-1.0.dist-info/METADATA", metadata)
        zf.writestr("demo-1.0.dist-info/RECORD", b"")
        crc = zf.getinfo("demo-1.0.dist-info/METADATA").CRC
    data = target.read_bytes()
    target.write_bytes(data.replace(crc.to_bytes(4, "little"), (crc ^ 1).to_bytes(4, "little")))
    result = audit_wheel(target, CPU)
    assert violations(result)["unreadable-metadata"] == ["demo-1.0.dist-info/METADATA"]
    assert "CRC-32" in render_text([result])


def test_bad_file_name_and_missing_file_are_located_findings(tmp_path: Path) -> None:
    odd = tmp_path / "not-a-wheel-name.whl"
    odd.write_bytes(make_wheel(tmp_path / "w", PURE).read_bytes())
    assert "bad-filename" in violations(audit_wheel(odd, CPU))
    gone = audit_wheel(tmp_path / "gone.whl", CPU)
    assert [f.location for f in gone.violations] == [str(tmp_path / "gone.whl")]


def test_pure_tag_on_a_wheel_with_an_elf_file_is_a_violation(tmp_path: Path) -> None:
    assert PTHREAD is not None
    wheel = make_wheel(tmp_path, {**PURE, "demo/libpthread.so.0": PTHREAD}, tag="py3-none-any")
    assert "platform-tag" in violations(audit_wheel(wheel, CPU))


def test_json_report_is_serialisable_and_counts_violations(tmp_path: Path) -> None:
    import json

    wheel = make_wheel(tmp_path, PURE, breakage=Breakage(tamper_record="demo/data.txt"))
    data = to_json([audit_wheel(wheel, CPU)])
    assert json.loads(json.dumps(data))["ok"] is False
    assert [v["code"] for v in data["wheels"][0]["violations"]] == ["record-hash"]


# ---------------------------------------------------------------------------------------------
# mangled zips: any bytes give an audit with located findings, never an exception


def seed_wheel() -> bytes:
    buffer = io.BytesIO()
    files = dict(PURE)
    if PTHREAD is not None:
        files["demo/lib/libpthread.so.0"] = PTHREAD.read_bytes()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\n")
        zf.writestr("demo-1.0.dist-info/RECORD", b"demo/__init__.py,,\n")
    return buffer.getvalue()


SEED = seed_wheel()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mangled")


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=30),
    st.integers(1, len(SEED)),
)
def test_mangled_zip_gives_an_audit_and_never_an_exception(
    scratch: Path, flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(SEED)
    for offset, value in flips:
        data[offset] = value
    wheel = scratch / "demo-1.0-py3-none-any.whl"
    wheel.write_bytes(bytes(data[:cut]) if cut < len(SEED) // 2 else bytes(data))
    result = audit_wheel(wheel, CPU)
    assert all(f.wheel == str(wheel) for f in result.findings)
    assert not any(f.code == "internal" for f in result.findings), render_text([result])


ELF_SEED = PTHREAD.read_bytes() if PTHREAD else b"\x7fELF"


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.integers(0, len(ELF_SEED) - 1), st.integers(0, 255)), min_size=1, max_size=25
    )
)
def test_wheel_with_a_mangled_elf_gives_findings_and_never_an_exception(
    scratch: Path, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(ELF_SEED)
    for offset, value in flips:
        data[offset] = value
    wheel = make_wheel(
        scratch / "elf",
        {
            "demo/__init__.py": b"",
            "demo/lib/libx.so.0": bytes(data),
            "demo/_x.cpython-311-x86_64-linux-gnu.so": bytes(data),
        },
    )
    result = audit_wheel(wheel, CPU)
    assert not any(f.code == "internal" for f in result.findings), render_text([result])
    assert all(
        f.member is None
        or f.member in {"demo/lib/libx.so.0", "demo/_x.cpython-311-x86_64-linux-gnu.so"}
        for f in result.violations
    )


def libstdcxx_wheel(tmp_path: Path) -> tuple[Path, bytes]:
    """A wheel holding this host's libstdc++ (a few MB of ELF), and the library's bytes."""
    lib = system_library("libstdc++.so.6")
    if lib is None:
        pytest.skip("no libstdc++ on this host")
    data = lib.read_bytes()
    return make_wheel(tmp_path, {"demo/__init__.py": b"", "demo/lib/libstdc++.so.6": data}), data


def test_big_member_read_from_saved_inflater_states_equals_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members, raw
    from wheels.elf import read_elf

    wheel, data = libstdcxx_wheel(tmp_path)
    whole = audit_wheel(wheel, CPU)
    for name, value in (
        ("ONE_SHOT_BELOW", 1024),
        ("ONE_CALL_BELOW", 1),  # libdeflate would read it in one call
        ("SNAPSHOT_ABOVE", 1),
        ("SNAPSHOT_EVERY", 64 << 10),
        ("KEEP_PREFIX", 4096),
        ("INFLATE_STEP", 4096),
        ("OUT_STEP", 5000),  # less than a step inflates to: the rest is fed again
        ("STREAM_READ_ABOVE", 1),  # read from the wheel in steps, and again for ranges
    ):
        for module in (members, raw):  # each module that reads it
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    pieces = audit_wheel(wheel, CPU)
    assert not pieces.violations and pieces.findings == whole.findings
    assert pieces.elfs == whole.elfs
    assert to_json([pieces])["wheels"][0]["elfs"][0]["exports"] == read_elf(data).export_count


def test_big_member_read_in_steps_from_the_wheel_equals_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheels.audit import members, pool, raw

    wheel, _ = libstdcxx_wheel(tmp_path)
    read = audit_wheel(wheel, CPU)
    opened: list[int] = []

    class Spy(raw.RawFile):
        def __init__(self, fd: int, start: int, size: int) -> None:
            opened.append(size)
            super().__init__(fd, start, size)

    monkeypatch.setattr(pool, "BATCH_BYTES", 1)  # each member alone, as a big one is
    monkeypatch.setattr(raw, "STREAM_READ_ABOVE", 1)  # a big member: left in the wheel,
    monkeypatch.setattr(members, "SPARSE_ABOVE", 1)  # streamed and kept where it is read
    monkeypatch.setattr(raw, "RawFile", Spy)
    stepped = audit_wheel(wheel, CPU)
    assert opened  # the library was read in steps, not whole
    assert not stepped.violations and stepped.findings == read.findings
    assert stepped.elfs == read.elfs
    opened.clear()
    filling = audit_wheel(wheel, CPU, cache_dir=tmp_path / "cache")  # its steps key it
    assert opened and filling.elfs == read.elfs and filling.stats.cached_batches == 0
    again = audit_wheel(wheel, CPU, cache_dir=tmp_path / "cache")
    assert again.stats.cached_batches == again.stats.batches and again.elfs == read.elfs


def test_corrupt_cache_entries_are_misses_not_errors(tmp_path: Path) -> None:
    files = {**PURE, **({"demo/lib/libpthread.so.0": PTHREAD} if PTHREAD else {})}
    wheel = make_wheel(tmp_path / "w", files)
    cache = tmp_path / "cache"
    first = audit_wheel(wheel, CPU, cache_dir=cache)
    entries = list(cache.rglob("*.json"))
    assert entries
    for i, entry in enumerate(entries):
        entry.write_text(
            [
                "{not json",
                '{"version": 1}',
                '{"version": "infini-stack-audit-2", "members": [{"elf": {"needed": 3}}]}',
            ][i % 3]
        )
    again = audit_wheel(wheel, CPU, cache_dir=cache)
    assert again.stats.cached_batches == 0
    assert [f.line() for f in again.findings] == [f.line() for f in first.findings]


def test_record_with_sha512_rows_is_checked_with_sha512(tmp_path: Path) -> None:
    import base64
    import hashlib

    source = make_wheel(tmp_path / "src", PURE)
    target = tmp_path / "out" / source.name
    target.parent.mkdir()
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        record_name = next(n for n in src.namelist() if n.endswith("RECORD"))
        rows = []
        for info in src.infolist():
            if info.filename == record_name:
                continue
            data = src.read(info)
            digest = base64.urlsafe_b64encode(hashlib.sha512(data).digest()).rstrip(b"=")
            rows.append(f"{info.filename},sha512={digest.decode()},{len(data)}")
            dst.writestr(info, data)
        good = "\n".join([*rows, f"{record_name},,"]) + "\n"
        dst.writestr(record_name, good)
    assert audit_wheel(target, CPU).ok


HEADER_TEXTS = [
    "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.42)\nRoot-Is-Purelib: false\n"
    "Tag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\n",
    "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy (>=1.0)\n"
    "Requires-Dist: torch ; extra == 'gpu'\nDescription: line one\n        |line two\n"
    "\tand a tab\n\nThe body: not a header\nName: nor is this\n",
    "name: lower\r\nNAME: upper\r\nTag:no-space\r\n\r\n",
    "From someone\nName: after the envelope\n",
    "Name: x\nnot a header line\nVersion: 1\n",
    "Key:   padded value   \nEmpty:\nColon: a: b\n",
    "",
]


@pytest.mark.parametrize("text", HEADER_TEXTS)
def test_wheel_and_metadata_headers_are_read_as_the_email_package_reads_them(text: str) -> None:
    from email.parser import Parser

    theirs = Parser().parsestr(text)
    ours = Headers(text)
    for key in ("Name", "name", "Tag", "Requires-Dist", "Description", "Key", "Empty", "Colon"):
        assert ours.get(key) == theirs.get(key), key
        assert ours.get_all(key) == (theirs.get_all(key) or []), key


@given(st.text(alphabet="Nam e:Tg\t\r\nFro-1", max_size=60))
def test_any_header_text_is_read_as_the_email_package_reads_it(text: str) -> None:
    from email.parser import Parser

    theirs = Parser().parsestr(text)
    ours = Headers(text)
    for key in ("Name", "Tag", "a", "From", "e"):
        assert ours.get_all(key) == (theirs.get_all(key) or []), key
