"""wheels.cxxruntime's pattern of C++ runtime definitions: factored for speed, it finds exactly
the names the plain list of twelve prefixes finds."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from wheels.cxxruntime import _RUNTIME

PLAIN = re.compile(
    r"\0("
    r"_ZN(?:K)?St6locale\w*|_ZNSt8ios_base\w*|_ZN(?:K)?St7codecvt\w*|_ZN(?:K)?St5ctype\w*"
    r"|_ZTVN10__cxxabiv\w*|_ZTIN10__cxxabiv\w*|__cxa_\w+|__gxx_personality_v0"
    r"|_ZSt9terminatev|_ZSt13set_terminate\w*|_ZSt17__throw_\w+|_ZSt19__throw_\w+"
    r")(?=\0|$)"
)
PREFIXES = [
    "_ZNSt6locale",
    "_ZNKSt6locale",
    "_ZNSt8ios_base",
    "_ZNKSt8ios_base",  # (not one of them: ios_base has no K form in the list)
    "_ZNSt7codecvt",
    "_ZNKSt7codecvt",
    "_ZNSt5ctype",
    "_ZNKSt5ctype",
    "_ZTVN10__cxxabiv",
    "_ZTIN10__cxxabiv",
    "_ZTSN10__cxxabiv",
    "__cxa_",
    "__cxa",
    "__gxx_personality_v0",
    "__gxx_personality_v1",
    "_ZSt9terminatev",
    "_ZSt13set_terminate",
    "_ZSt17__throw_",
    "_ZSt18__throw_",
    "_ZSt19__throw_",
    "_ZN2at6Tensor",
    "_Z",
    "_",
    "PyInit_",
    "",
]
SUFFIXES = st.text(alphabet="aZ_09.@$", max_size=4)
NAMES = st.builds(lambda p, s: p + s, st.sampled_from(PREFIXES), SUFFIXES)


@settings(max_examples=3000, deadline=None)
@given(st.lists(NAMES, max_size=6))
def test_the_factored_pattern_finds_what_the_plain_list_finds(names: list[str]) -> None:
    text = "\0" + "\0".join(names)
    assert _RUNTIME.findall(text) == PLAIN.findall(text)


def test_every_prefix_of_the_list_is_found() -> None:
    names = "\0".join(
        [
            "_ZNSt6localeC1Ev",
            "_ZNKSt6locale4nameEv",
            "_ZNSt8ios_baseD2Ev",
            "_ZNKSt7codecvtIcc11__mbstate_tE6do_outE",
            "_ZNKSt5ctypeIcE8do_widenEc",
            "_ZTVN10__cxxabiv117__class_type_infoE",
            "_ZTIN10__cxxabiv115__forced_unwindE",
            "__cxa_throw",
            "__gxx_personality_v0",
            "_ZSt9terminatev",
            "_ZSt13set_terminatePFvvE",
            "_ZSt17__throw_bad_allocv",
            "_ZSt19__throw_logic_errorPKc",
        ]
    )
    assert len(_RUNTIME.findall("\0" + names)) == 13
