"""In-process symbol matching: the Itanium demangler prints what c++filt prints."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest

from builder.providers.demangle import Unsupported, demangle
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
}


@pytest.mark.parametrize("mangled", sorted(KNOWN))
def test_demangle_prints_what_cxxfilt_prints(mangled: str) -> None:
    assert demangle(mangled) == KNOWN[mangled]


@pytest.mark.parametrize("mangled", ["foo", "_Z", "_ZN1AE1", "_ZZ4mainE1x", "_Z1fIiEvT0_"])
def test_unsupported_or_malformed_names_raise_unsupported(mangled: str) -> None:
    with pytest.raises(Unsupported):
        demangle(mangled)


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


def _cxa_demangle() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    path = ctypes.util.find_library("stdc++")
    if path is None:
        return None
    try:
        function = ctypes.CDLL(path).__cxa_demangle
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int),
    ]
    return function


def test_every_libstdcxx_export_this_demangler_accepts_matches_libstdcxxs_own_demangler() -> None:
    """An oracle check: libstdc++'s __cxa_demangle (libiberty, as c++filt) on its own exports."""
    oracle = _cxa_demangle()
    library = ctypes.util.find_library("stdc++")
    if oracle is None or library is None:
        pytest.skip("libstdc++'s __cxa_demangle is not loadable here")
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
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    checked = mismatches = 0
    for name in exported_functions(path):
        if not name.startswith("_Z"):
            continue
        try:
            ours = demangle(name)
        except Unsupported:
            continue
        status = ctypes.c_int(0)
        raw = oracle(name.encode(), None, None, ctypes.byref(status))
        assert status.value == 0, name
        theirs = ctypes.string_at(raw).decode()
        libc.free(raw)
        checked += 1
        mismatches += ours != theirs
        assert ours == theirs, name
    assert checked > 1000 and mismatches == 0
