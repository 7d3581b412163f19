"""``unpinned-abi-partner`` on real wheels built here with g++: a partner distribution whose C++
library changes its ABI between versions 1.0.0 and 2.0.0, and a wheel whose library binds a
C++ symbol from version 1.0.0, written by the assembler with and without the pin."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tests.wheelmaker import LINUX, make_wheel
from wheels.assemble import WheelInputs, pack
from wheels.audit import audit_wheel
from wheels.audit_report import WheelAudit, render_text
from wheels.naming import wheel_name
from wheels.policy import DistLib, VendorPolicy, load_vendor_policy
from wheels.spec import WheelSpec

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="no g++"),
]

# 1.0.0 takes an int, 2.0.0 a long: the C++ name of the function changes with its signature.
PARTNER = {
    "1.0.0": "namespace partner { int scale(int x) { return 2 * x; } }\n",
    "2.0.0": "namespace partner { long scale(long x) { return 3 * x; } }\n",
}
SYMBOL_V1 = "_ZN7partner5scaleEi"
CONSUMER = """
namespace partner { int scale(int x); }
extern "C" int consume(int x) { return partner::scale(x) + 1; }
"""
LIB = "libabipartner.so"


def gxx(work: Path, name: str, source: str, *extra: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"{name}.cpp"
    src.write_text(source)
    out = work / name
    # Linked with the shared C++ runtime, as the stack's libraries are (cxx_runtime: shared).
    argv = ["g++", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *extra]
    argv += ["-Wl,--no-as-needed", "-lstdc++"]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    return out


OTHER_LIB = "libotherpartner.so"  # a C library of a second partner distribution
OTHER = 'extern "C" int other_value(void) { return 7; }\n'
# The partner's symbol in a version node of its own, as a version script gives it.
VERSIONED_SCRIPT = "PARTNER_1.0 { global: *; };\n"
CONSUMER_OF_BOTH = """
namespace partner { int scale(int x); }
extern "C" int other_value(void);
extern "C" int consume(int x) { return partner::scale(x) + other_value(); }
"""


def policy_with_partner() -> VendorPolicy:
    cpu = load_vendor_policy("cpu")
    partner = DistLib(distribution="abi-partner", dir="abi_partner/lib")
    other = DistLib(distribution="other-partner", dir="other_partner/lib")
    return replace(cpu, distributions={**cpu.distributions, LIB: partner, OTHER_LIB: other})


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Path]:
    """Both partner wheels, and the consumer's library linked against version 1.0.0."""
    out: dict[str, Path] = {}
    for version, source in PARTNER.items():
        lib = gxx(tmp_path / f"partner-{version}", LIB, source, f"-Wl,-soname,{LIB}")
        out[version] = make_wheel(
            tmp_path / "wheels", {f"abi_partner/lib/{LIB}": lib}, name="abi-partner",
            version=version,
        )  # fmt: skip
    out["consumer"] = gxx(
        tmp_path / "consumer",
        "libconsumer.so",
        CONSUMER,
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../abi_partner/lib",
        str(tmp_path / "partner-1.0.0" / LIB),
    )
    return out


def consumer_wheel(
    tmp_path: Path, library: Path, partners: dict[str, str], needs: tuple[str, ...] = ()
) -> Path:
    """The consumer's wheel as the assembler writes it, with Requires-Dist abi-partner (and
    ``needs``, unpinned)."""
    root = tmp_path / f"root-{len(partners)}-{len(needs)}"
    (root / "demo" / "lib").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "demo" / "lib" / "libconsumer.so").write_bytes(library.read_bytes())
    spec = WheelSpec(
        name="demo", version="1.0", component="demo", python_dir="python", packages=("demo",),
        library_dir="demo/lib", bundle=(), requires=(), requires_python=">=3.8", summary="",
    )  # fmt: skip
    inputs = WheelInputs(
        spec=spec,
        name=replace(wheel_name("demo", "1.0", "cpu"), platform_tag=LINUX.split("-")[2]),
        prefixes={},
        supplied={},
        partners=partners,
    )
    out = tmp_path / f"dist-{len(partners)}-{len(needs)}"
    out.mkdir()
    return pack(root, inputs, ["abi-partner", *needs], out / inputs.name.filename)


def install(wheel: Path, site: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(name).decode()
    return [
        line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist")
    ]


def audit_beside(wheel: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> WheelAudit:
    monkeypatch.syspath_prepend(str(site))  # where the audit finds installed distributions
    return audit_wheel(wheel, policy_with_partner(), workers=1)


def test_the_two_partner_versions_are_abi_incompatible(
    built: dict[str, Path], tmp_path: Path
) -> None:
    """Beside 1.0.0 the consumer loads and runs; beside 2.0.0 ld.so refuses it (each in a
    process of its own: a loaded library stays loaded by its SONAME)."""
    outcomes = {}
    for version in PARTNER:
        site = tmp_path / f"site-{version}"
        install(built[version], site)
        (site / "demo" / "lib").mkdir(parents=True)
        consumer = site / "demo" / "lib" / "libconsumer.so"
        consumer.write_bytes(built["consumer"].read_bytes())
        code = f"import ctypes; print(ctypes.CDLL({str(consumer)!r}).consume(20))"
        run = subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True
        )
        outcomes[version] = run.stdout.strip() or run.stderr.strip().splitlines()[-1]
    assert outcomes["1.0.0"] == "41"
    assert f"undefined symbol: {SYMBOL_V1}" in outcomes["2.0.0"]


def test_a_wheel_built_against_version_1_pins_it_and_passes(
    built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = consumer_wheel(tmp_path, built["consumer"], {"abi-partner": "1.0.0"})
    assert requires_dist(wheel) == ["abi-partner==1.0.0"]
    install(built["1.0.0"], tmp_path / "site")
    result = audit_beside(wheel, tmp_path / "site", monkeypatch)
    assert result.ok, render_text([result])
    assert "unpinned-abi-partner" not in {f.code for f in result.findings}


def test_an_unpinned_wheel_is_refused_naming_the_partner_and_its_symbol(
    built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = consumer_wheel(tmp_path, built["consumer"], {})
    assert requires_dist(wheel) == ["abi-partner"]
    install(built["1.0.0"], tmp_path / "site")
    result = audit_beside(wheel, tmp_path / "site", monkeypatch)
    (finding,) = [f for f in result.violations if f.code == "unpinned-abi-partner"]
    assert finding.member == "demo/lib/libconsumer.so"
    assert "abi-partner" in finding.message and SYMBOL_V1 in finding.message
    assert "'abi-partner'" in finding.message and "==VERSION" in finding.message


def test_a_partner_not_installed_here_is_known_by_its_unbound_cxx_symbols(
    built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = consumer_wheel(tmp_path, built["consumer"], {})
    result = audit_beside(wheel, tmp_path / "empty", monkeypatch)
    (finding,) = [f for f in result.violations if f.code == "unpinned-abi-partner"]
    assert SYMBOL_V1 in finding.message


def consumer_of_both(tmp_path: Path, versioned: bool) -> Path:
    """A consumer of partner 1.0.0's C++ function (in version node PARTNER_1.0 when
    ``versioned``) and of the other partner's C function, unpinned, neither installed here."""
    work = tmp_path / ("versioned" if versioned else "plain")
    script = work / "partner.map"
    work.mkdir(parents=True)
    script.write_text(VERSIONED_SCRIPT)
    flags = [f"-Wl,--version-script,{script}"] if versioned else []
    partner = gxx(work / "partner", LIB, PARTNER["1.0.0"], f"-Wl,-soname,{LIB}", *flags)
    other = gxx(work / "other", OTHER_LIB, OTHER, f"-Wl,-soname,{OTHER_LIB}")
    runpath = "$ORIGIN/../../abi_partner/lib:$ORIGIN/../../other_partner/lib"
    consumer = gxx(
        work / "consumer",
        "libconsumer.so",
        CONSUMER_OF_BOTH,
        f"-Wl,--enable-new-dtags,-rpath,{runpath}",
        str(partner),
        str(other),
    )
    return consumer_wheel(work, consumer, {}, needs=("other-partner",))


def test_a_cxx_symbol_that_two_uninstalled_partners_could_define_is_a_warning_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unversioned, ``partner::scale`` could come from either library: no violation claims
    it comes from one; a warning names both, and the pin that would be needed."""
    result = audit_beside(consumer_of_both(tmp_path, False), tmp_path / "empty", monkeypatch)
    assert "unpinned-abi-partner" not in {f.code for f in result.violations}
    warnings = [f for f in result.warnings if f.code == "unpinned-abi-partner"]
    assert {w.message.split(" may come from ")[1].split(" of ")[0] for w in warnings} == {
        LIB,
        OTHER_LIB,
    }
    assert all(SYMBOL_V1 in w.message and "not readable here" in w.message for w in warnings)


def test_a_versioned_cxx_symbol_belongs_to_the_library_its_version_need_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``partner::scale@PARTNER_1.0`` is needed from libabipartner.so by name, so with both
    partners uninstalled it still convicts abi-partner, and only abi-partner."""
    result = audit_beside(consumer_of_both(tmp_path, True), tmp_path / "empty", monkeypatch)
    (finding,) = [f for f in result.findings if f.code == "unpinned-abi-partner"]
    assert finding.severity == "violation"
    assert f"from {LIB} of abi-partner" in finding.message and SYMBOL_V1 in finding.message
