"""In-process symbol matching: the demangler (libstdc++'s __cxa_demangle) prints what c++filt
prints, and says so when a host has none."""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.providers import demangle as demangle_module
from builder.providers.demangle import Unavailable, Unsupported, demangle
from builder.providers.symbols import exported_functions, function_identifier, normalize

# Mangled by g++ 12 from declarations shaped like upstream's linked operators; the expected text
# is what c++filt (libiberty) prints, and the flash:: one is verbatim upstream's required_symbols
# entry in InfiniOps src/linked/torch/nvidia/ops/flash_attn_varlen_func/flash_attn.yaml.
KNOWN = {
    "_ZN5flash14mha_varlen_fwdERN2at6TensorERKS1_S4_RSt8optionalIS1_ES4_S4_S7_RS5_IS3_ES7_S7_"
    "iiffbbiifbS5_INS0_9GeneratorEE": "flash::mha_varlen_fwd(at::Tensor&, at::Tensor const&, at::Tensor const&, "
    "std::optional<at::Tensor>&, at::Tensor const&, at::Tensor const&, "
    "std::optional<at::Tensor>&, std::optional<at::Tensor const>&, "
    "std::optional<at::Tensor>&, std::optional<at::Tensor>&, int, int, float, float, bool, "
    "bool, int, int, float, bool, std::optional<at::Generator>)",
    "_Z8rms_normRN2at6TensorES1_S1_d": "rms_norm(at::Tensor&, at::Tensor&, at::Tensor&, double)",
    "_Z15rms_norm_affineRKN2at6TensorES2_S2_dl": "rms_norm_affine(at::Tensor const&, at::Tensor const&, at::Tensor const&, double, long)",
    "_ZN1KC1Ei": "K::K(int)",
    "_ZN1KD2Ev": "K::~K()",
    "_ZNK1KclEi": "K::operator()(int) const",
    "_ZNK1KcvbEv": "K::operator bool() const",
    "_Z7name_ofRKSt6vectorINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESaIS5_EEPFviE": "name_of(std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, "
    "std::allocator<char> >, std::allocator<std::__cxx11::basic_string<char, "
    "std::char_traits<char>, std::allocator<char> > > > const&, void (*)(int))",
    "_Z5twiceIiET_S0_": "int twice<int>(int)",
    "_ZNSsC1EPKcRKSaIcE": "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::"
    "basic_string(char const*, std::allocator<char> const&)",
    "_ZN4llvm3sys22getDefaultTargetTripleB5cxx11Ev": "llvm::sys::getDefaultTargetTriple[abi:cxx11]()",
    "_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc": "std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
    "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, "
    "char const*)",
    "_ZTVN2at6TensorE": "vtable for at::Tensor",
    "_Z1fRA3_Ki": "f(int const (&) [3])",
    "_Z1fM1AKFviE": "f(void (A::*)(int) const)",
    "_Z1fIJEEvDpOT_": "void f<>()",
    "_Z3barv.cold": "bar() [clone .cold]",
    # Local names and lambdas, which the hand-written demangler that __cxa_demangle replaced
    # could not read, and a numbered clone, which it printed as two clones.
    "_ZZ4mainE1x": "main::x",
    "_ZZ4mainENKUlvE_clEv": "main::{lambda()#1}::operator()() const",
    "_Z3barv.cold.1": "bar() [clone .cold.1]",
}


@pytest.mark.parametrize("mangled", sorted(KNOWN))
def test_demangle_prints_what_cxxfilt_prints(mangled: str) -> None:
    assert demangle(mangled) == KNOWN[mangled]


@pytest.mark.parametrize("mangled", ["foo", "_Z", "_ZN1AE1", "_Z1fIiEvT0_", "i", "_Z1f\0"])
def test_unsupported_or_malformed_names_raise_unsupported(mangled: str) -> None:
    with pytest.raises(Unsupported):
        demangle(mangled)


def test_a_host_without_libstdcxx_gets_unavailable_naming_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(demangle_module, "LIBRARY", "libstdc++-absent.so.6")
    reason = demangle_module._load.__wrapped__()
    assert isinstance(reason, str) and "libstdc++-absent.so.6 cannot be loaded" in reason
    monkeypatch.setattr(demangle_module, "_load", lambda: reason)
    with pytest.raises(Unavailable, match="cannot be demangled"):
        demangle("_ZN1KC1Ei")


@pytest.mark.parametrize(
    ("signature", "ident"),
    [
        ("flash::mha_fwd(at::Tensor&, int)", "mha_fwd"),
        ("void ns::f<int, std::vector<int> >(int)", "f"),
        ("llvm::sys::getDefaultTargetTriple[abi:cxx11]()", "getDefaultTargetTriple"),
        ("K::~K()", "K"),
        ("rms_norm", "rms_norm"),
        ("K::operator()(int) const", None),
    ],
)
def test_function_identifier_is_the_final_source_name(signature: str, ident: str | None) -> None:
    assert function_identifier(signature) == ident


def test_matching_ignores_whitespace_only() -> None:
    spaced, tight = "f(int const &, std::vector<int> >)", "f(int const&,std::vector<int>>)"
    assert normalize(spaced) == normalize(tight)
    assert normalize("f(const int&)") != normalize("f(int const&)")


def test_every_libstdcxx_export_demangles_as_cxxfilt_prints_it() -> None:
    """An oracle check on libstdc++'s own exports: GNU c++filt, in another process, with
    ``--no-verbose`` (__cxa_demangle's options: the old ABI's ``std::string`` stays short)."""
    cxxfilt = shutil.which("c++filt")
    library = ctypes.util.find_library("stdc++")
    if cxxfilt is None or library is None:
        pytest.skip("c++filt or libstdc++ is not installed here")
    path = next(
        (
            d / library
            for d in (
                Path("/usr/lib/x86_64-linux-gnu"),
                Path("/usr/lib64"),
                Path("/lib/x86_64-linux-gnu"),
            )
            if (d / library).exists()
        ),
        None,
    )
    if path is None:
        pytest.skip(f"cannot locate {library}")
    names = [n for n in exported_functions(path) if n.startswith("_Z")]
    filtered = subprocess.run(
        [cxxfilt, "--no-verbose"],
        input="\n".join(names) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(names) > 1000 and len(filtered) == len(names)
    mismatches = [(n, t) for n, t in zip(names, filtered, strict=True) if demangle(n) != t]
    assert mismatches == []
