"""Which C++ runtime an ELF file uses: the shared ``libstdc++.so.6``, or a private copy.

A shared object linked with ``-static-libstdc++`` (or by a compiler whose library directory
holds only ``libstdc++.a``) carries its own copy of the C++ runtime: its own ``std::locale``
facets, its own exception machinery and RTTI. That is harmless for a self-contained extension
whose C++ never leaves it (common manylinux practice, usually with the copy's symbols hidden),
and fatal for libraries that pass C++ objects to each other: a locale facet of one runtime read
by another's code, an exception thrown by one runtime's ``__cxa_throw`` that the other's
personality routine never catches, ``typeid`` comparisons that fail across the line.

This module classifies one ELF from what the dynamic linker sees (its DT_NEEDED and its exported
definitions); the audit and preflight decide what the classification means for a wheel or a
compiler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from wheels.elf import ElfInfo

Runtime = Literal["shared", "private", "none"]

SHARED_RUNTIMES = frozenset({"libstdc++.so.6", "libc++.so.1"})
UNWINDERS = frozenset({"libgcc_s.so.1", "libunwind.so.1", "libunwind.so.8"})

# Definitions only the C++ runtime itself has: locales and iostreams' base, the C++ ABI
# (exceptions, RTTI vtables, guards), the personality routine and the unwinder. Code that uses
# the shared runtime references these; a private copy defines them.
# Written with the common prefixes factored out: at each of a library's names re tries one
# branch where it would try twelve, 36 -> 22 ms over torch's 136 ELF files (14 MB of names).
# They are: _ZN(K)St6locale*, _ZNSt8ios_base*, _ZN(K)St7codecvt*, _ZN(K)St5ctype*,
# _ZTVN10__cxxabiv*, _ZTIN10__cxxabiv*, __cxa_*, __gxx_personality_v0, _ZSt9terminatev,
# _ZSt13set_terminate*, _ZSt17__throw_*, _ZSt19__throw_*.
_RUNTIME = re.compile(
    r"\0("
    r"_Z(?:N(?:K?St(?:6locale|7codecvt|5ctype)\w*|St8ios_base\w*)"
    r"|T[VI]N10__cxxabiv\w*"
    r"|St(?:9terminatev|13set_terminate\w*|1[79]__throw_\w+))"
    r"|__(?:cxa_\w+|gxx_personality_v0)"
    r")(?=\0|$)"
)


def runtime_internals(info: ElfInfo) -> tuple[str, ...]:
    """The C++ runtime definitions ``info`` exports (:data:`_RUNTIME`), sorted."""
    return tuple(sorted(set(info.exported_like(_RUNTIME))))


# What a copy linked in with its symbols hidden (``-Wl,--exclude-libs,ALL``) still shows: the
# glibc internals that libstdc++'s locale code calls (its "gnu" locale model) and the lookup
# that libgcc's own unwinder uses (GCC 12 and later). Nothing but a C++ runtime calls them.
HIDDEN_SIGNS = (
    "__newlocale",
    "__uselocale",
    "__duplocale",
    "__freelocale",
    "__nl_langinfo_l",
    "_dl_find_object",
)


@dataclass(frozen=True)
class CxxRuntime:
    """How one ELF gets its C++ runtime."""

    runtime: Runtime  # shared: needs libstdc++.so.6 (or libc++); private: carries a copy
    internals: tuple[str, ...]  # runtime definitions it exports (a private copy that shows)
    signs: tuple[str, ...] = ()  # HIDDEN_SIGNS it imports (a private copy that hides)

    @property
    def private(self) -> bool:
        return self.runtime == "private"


def classify(info: ElfInfo) -> CxxRuntime:
    """What ``info`` links: the shared runtime, a private copy, or no C++ runtime at all.

    A copy whose symbols are hidden (``-Wl,--exclude-libs,ALL``) leaves no definitions to see;
    such an ELF is "private" when it imports what only a C++ runtime calls (:data:`HIDDEN_SIGNS`)
    or has C++ symbols at its interface, and needs no shared runtime; "none" when nothing C++
    shows at all (then nothing C++ can cross either).
    """
    internals = runtime_internals(info)
    imported = set(info.undefined)
    signs = tuple(s for s in HIDDEN_SIGNS if s in imported)
    if set(info.needed) & SHARED_RUNTIMES:
        runtime: Runtime = "shared"
    elif internals or signs or cxx_interface(info):
        runtime = "private"
    else:
        runtime = "none"
    return CxxRuntime(runtime=runtime, internals=internals, signs=signs)


# The vector variants of C functions (the x86-64 and AArch64 vector function ABIs, glibc's
# libmvec: _ZGVbN2v_cos is cos on two doubles in SSE registers) are named with the "_Z" prefix
# but are C, not C++: the letter after "_ZGV" is the ISA, then N or M (unmasked or masked). An
# Itanium guard variable's "_ZGV" is followed by a name (a digit, N, Z or S).
def is_cxx(name: str) -> bool:
    """Is ``name`` Itanium-mangled C++ (not a vector function ABI name, ``_ZGV[a-z][NM]``)?"""
    if not name.startswith("_Z"):
        return False
    return not (
        name.startswith("_ZGV") and len(name) > 5 and "a" <= name[4] <= "z" and name[5] in "NM"
    )


def cxx_interface(info: ElfInfo) -> bool:
    """Whether C++ symbols (Itanium-mangled names) are at the ELF's dynamic interface."""
    return _exports_cxx(info.export_names) or any(is_cxx(n) for n in info.undefined)


def _exports_cxx(names: str) -> bool:
    """Does the NUL-separated list ``names`` hold a C++ name? Found by str.find: not "\0" +
    names, a copy of 80 MB for TensorFlow's library, nor a regular expression over all of it."""
    at = 0 if names.startswith("_Z") else _next_z(names, 0)
    while at >= 0:
        if is_cxx(names[at : at + 8]):
            return True
        at = _next_z(names, at)
    return False


def _next_z(names: str, start: int) -> int:
    """Where the next name starting with "_Z" after ``start`` begins; -1 where none does."""
    found = names.find("\0_Z", start)
    return found + 1 if found >= 0 else -1


def cxx_exports(info: ElfInfo) -> frozenset[str]:
    return frozenset(n for n in info.exports if is_cxx(n))


def cxx_imports(info: ElfInfo) -> frozenset[str]:
    return frozenset(n for n in info.undefined if is_cxx(n))


def describe(result: CxxRuntime, shown: int = 4) -> str:
    """``defines 38 C++ runtime symbols (std::locale, __cxa_throw, ...) and needs no
    libstdc++.so.6: a private copy of the C++ runtime`` and the like, for messages."""
    if result.runtime == "shared":
        return "needs the shared C++ runtime"
    if result.runtime == "none":
        return "uses no C++ runtime at its interface"
    if not result.internals and result.signs:
        return (
            f"imports {', '.join(result.signs)}, which only a C++ runtime's own locale or "
            "unwinder code calls, and needs no libstdc++.so.6: a private copy of (part of) the "
            "C++ runtime that exports none of it"
        )
    if not result.internals:
        return (
            "has C++ symbols at its interface but needs no libstdc++.so.6: a private, hidden "
            "copy of the C++ runtime"
        )
    labels = list(dict.fromkeys(_readable(n) for n in sorted(result.internals, key=_rank)))
    more = ", ..." if len(labels) > shown else ""
    return (
        f"defines {len(result.internals)} C++ runtime symbols ({', '.join(labels[:shown])}"
        f"{more}) and needs no libstdc++.so.6: a private copy of the C++ runtime"
    )


_READABLE = (
    ("_ZNSt6locale", "std::locale"),
    ("_ZNKSt6locale", "std::locale"),
    ("_ZNSt8ios_base", "std::ios_base"),
    ("_ZNSt7codecvt", "std::codecvt"),
    ("_ZNKSt7codecvt", "std::codecvt"),
    ("_ZNSt5ctype", "std::ctype"),
    ("_ZNKSt5ctype", "std::ctype"),
    ("_ZTVN10__cxxabiv", "the RTTI vtables"),
    ("_ZTIN10__cxxabiv", "the RTTI types"),
    ("_ZSt9terminatev", "std::terminate"),
)


_FIRST = ("_ZNSt6locale", "__cxa_throw", "_ZNSt8ios_base", "__gxx_personality_v0", "_ZTVN10")


def _rank(name: str) -> tuple[int, str]:
    """The best-known runtime parts first, so that a message names them."""
    return next((i for i, p in enumerate(_FIRST) if name.startswith(p)), len(_FIRST)), name


def _readable(name: str) -> str:
    return next((label for prefix, label in _READABLE if name.startswith(prefix)), name)
