"""The offline subset of the differential run (tests/differential/): each shape of a real wheel
that once ended our audit in an internal error or a false violation, rebuilt with gcc
(tests/wheelmaker.py), with our verdict and, where auditwheel is importable, its agreement."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

from tests.wheelmaker import EXT, Corpus, auditwheel_tag, corpus, have_gcc
from wheels.audit import audit_wheel
from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves, classify_extensions, own_roots, resolve_all
from wheels.audit.tags import manylinux_whitelist
from wheels.audit_report import WheelAudit, render_text
from wheels.elf import ELF_MAGIC, HostLibraries, read_elf
from wheels.policy import host_library_dirs, load_vendor_policy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not have_gcc(), reason="gcc is not installed"),
]

HAVE_AUDITWHEEL = importlib.util.find_spec("auditwheel") is not None


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return corpus(tmp_path_factory.mktemp("real-shapes"))


def audit(path: Path) -> WheelAudit:
    return audit_wheel(path, load_vendor_policy("cpu"))


def agrees_with_auditwheel(wheel: Path, ours: WheelAudit) -> bool:
    """True where auditwheel is not importable: then there is nothing to compare with."""
    return not HAVE_AUDITWHEEL or auditwheel_tag(wheel) == ours.auditwheel_tag


def codes(result: WheelAudit, severity: str = "violation") -> list[str]:
    return [f.code for f in result.findings if f.severity == severity]


@pytest.mark.parametrize(
    "label",
    ["extension_needs_extension", "extension_needed_first", "extension_needs_extension_rpath"],
)
def test_an_extension_needed_by_another_extension_is_loaded_as_its_own_root(
    wheels: Corpus, label: str
) -> None:
    result = audit(wheels[label])
    assert result.ok and "internal" not in codes(result), render_text([result])
    assert result.auditwheel_tag == "manylinux_2_5_x86_64"
    assert {e.kind for e in result.elfs} == {"extension"}
    needing = next(e for e in result.elfs if e.needed and e.needed[0].endswith(EXT))
    (need,) = [n for n in needing.needs if n.soname == needing.needed[0]]
    assert (need.kind, need.where) == ("wheel", f"demo/{need.soname}")
    assert agrees_with_auditwheel(wheels[label], result)


def test_an_rpath_of_one_extension_does_not_reach_for_another_imported_alone(
    wheels: Corpus,
) -> None:
    wheel = wheels["extension_rpath_inherited"]
    result = audit(wheel)
    assert "internal" not in codes(result)
    (finding,) = [f for f in result.violations if f.code == "unresolved"]
    assert finding.member == f"demo/_b{EXT}" and "libx.so" in finding.message
    assert "demo/lib/libx.so but no RUNPATH/RPATH entry reaches it" in finding.message
    assert result.auditwheel_tag == "linux_x86_64"
    assert agrees_with_auditwheel(wheel, result)


def test_a_compressed_tag_set_in_wheel_tag_lines_is_a_warning_not_a_wrong_tag(
    wheels: Corpus,
) -> None:
    wheel = wheels["compressed_wheel_tag"]
    result = audit(wheel)
    assert result.ok, render_text([result])
    assert codes(result, "warning") == ["wheel-tag"]
    assert "compressed tag set" in result.warnings[0].message
    assert set(result.declared) == {"manylinux2014_x86_64", "manylinux_2_17_x86_64"}
    assert agrees_with_auditwheel(wheel, result)


def test_wheel_tag_lines_naming_the_file_names_platform_by_its_pep600_name_too_pass(
    wheels: Corpus,
) -> None:
    """xgboost-cpu 2.1.3: ``manylinux2014_x86_64`` in the file name, that and
    ``manylinux_2_17_x86_64`` (the same platform) in WHEEL. A platform the file name does not
    name is a warning: stale metadata, which no installer reads (docs/audit-verdicts.md)."""
    alias = audit(wheels["alias_wheel_tag"])
    assert alias.ok and not codes(alias, "warning"), render_text([alias])
    assert agrees_with_auditwheel(wheels["alias_wheel_tag"], alias)
    other = audit(wheels["other_wheel_tag"])
    (finding,) = [f for f in other.warnings if f.code == "wheel-tag"]
    assert finding.message.startswith(
        "Tag lines (manylinux2014_x86_64, manylinux_2_28_x86_64) disagree with the file name "
        "(manylinux2014_x86_64): "
    )


def test_a_pep600_tag_auditwheel_has_no_policy_for_is_judged_by_its_glibc_version(
    wheels: Corpus,
) -> None:
    fits = audit(wheels["manylinux_2_18"])
    assert fits.ok, render_text([fits])
    assert agrees_with_auditwheel(wheels["manylinux_2_18"], fits)
    over = audit(wheels["overclaimed_manylinux_2_18"])
    (finding,) = [f for f in over.violations if f.code == "platform-tag"]
    assert finding.message.startswith(
        "declares manylinux_2_18_x86_64, but its ELF files need glibc 2.34 or newer "
        "(manylinux_2_34_x86_64 at best)"
    )
    assert "symbol version GLIBC_2.34 needs glibc 2.34 or newer" in finding.message
    assert agrees_with_auditwheel(wheels["overclaimed_manylinux_2_18"], over)


def test_libm_functions_without_libm_needed_bind_in_the_interpreter_with_a_warning(
    wheels: Corpus,
) -> None:
    wheel = wheels["libm_from_the_interpreter"]
    result = audit(wheel)
    assert result.ok, render_text([result])
    (ext,) = result.elfs
    assert "libm.so.6" not in ext.needed and ext.symbols.missing == ()
    (warning,) = [f for f in result.warnings if f.code == "interpreter-symbols"]
    assert "sqrt" in warning.message and "libm.so.6" in warning.message
    assert agrees_with_auditwheel(wheel, result)


def test_a_ctypes_library_named_like_an_abi3_extension_needs_no_pyinit(wheels: Corpus) -> None:
    wheel = wheels["ctypes_library_named_abi3"]
    result = audit(wheel)
    assert result.ok, render_text([result])
    (elf,) = result.elfs
    assert elf.kind == "library"
    assert codes(result, "warning") == ["not-an-extension"]
    assert agrees_with_auditwheel(wheel, result)


def test_a_misnamed_extension_that_uses_the_c_api_still_needs_its_pyinit(
    wheels: Corpus,
) -> None:
    result = audit(wheels["no_pyinit"])
    assert codes(result) == ["no-pyinit"]


def context_of(wheel: Path) -> Elves:
    """The audit's ld.so model of ``wheel`` with every root loaded (members read by zipfile)."""
    with zipfile.ZipFile(wheel) as zf:
        contents = {n: zf.read(n) for n in zf.namelist()}
    elfs = {n: read_elf(d) for n, d in contents.items() if d[:4] == ELF_MAGIC}
    ctx = Elves(
        policy=load_vendor_policy("cpu"),
        elfs=elfs,
        install_of={n: n for n in contents},
        installed={n: n for n in contents},
        requires={},
        whitelist=manylinux_whitelist("x86_64"),
        host=HostLibraries(host_library_dirs()),
        site_dirs=(),
        arch="x86_64",
    )
    findings = Findings(str(wheel))
    classify_extensions(ctx, findings)
    resolve_all(ctx, findings)
    return ctx


def test_every_extension_and_executable_of_every_built_wheel_is_a_root_of_its_own(
    wheels: Corpus,
) -> None:
    for label, wheel in wheels.wheels.items():
        if label in ("zip_not_wheel", "truncated_elf"):
            continue
        ctx = context_of(wheel)
        roots = own_roots(ctx)
        assert set(ctx.extensions) <= set(roots), label
        assert set(roots) <= set(ctx.groups), label


@pytest.mark.skipif(not have_gcc(), reason="needs gcc")
def test_an_unreadable_init_beside_an_extension_is_a_finding_not_a_stopped_audit(
    tmp_path: Path,
) -> None:
    from tests.wheelmaker import LONELY_EXTENSION, TAG, Compiler, make_wheel

    ext = Compiler(tmp_path / "build").shared(f"_x{EXT}", LONELY_EXTENSION.format(mod="_x"))
    files: dict[str, bytes | Path] = {"demo/__init__.py": b"import torch\n", f"demo/_x{EXT}": ext}
    wheel = make_wheel(tmp_path, files, tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64")
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("demo/__init__.py")
    # The member's compression method, in its local header and the central directory, set to
    # 99 (AE-x encryption), which zipfile cannot read.
    data[info.header_offset + 8 : info.header_offset + 10] = (99).to_bytes(2, "little")
    name = b"demo/__init__.py"
    central = data.index(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(name)] != name:
        central = data.index(b"PK\x01\x02", central + 4)
    data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    wheel.write_bytes(bytes(data))
    result = audit_wheel(wheel, load_vendor_policy("cpu"))
    codes = {f.code for f in result.findings}
    assert "internal" not in codes, render_text([result])
    assert any(f.member == "demo/__init__.py" for f in result.violations), render_text([result])
