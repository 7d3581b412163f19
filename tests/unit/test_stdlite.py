"""wheels.stdlite's stand-ins behave as functools', contextlib's and collections' own."""

from __future__ import annotations

import collections
import contextlib
import functools
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wheelmaker import make_wheel, modules_of_an_audit, small_extension_wheel
from wheels import stdlite


def _calls(decorate: Callable[[Callable[..., int]], Callable[..., int]], keys: list[int]) -> list:
    """Which arguments reach the function, and what each call returns, under ``decorate``."""
    reached: list[object] = []

    def square(x: int, *, twice: bool = False) -> int:
        reached.append((x, twice))
        return x * x * (2 if twice else 1)

    cached = decorate(square)
    answers = [cached(k, twice=True) if k % 3 == 0 else cached(k) for k in keys]
    return [reached, answers]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=40), st.sampled_from([None, 0, 1, 2, 3, 128]))
def test_lru_cache_calls_through_exactly_when_functools_would(
    keys: list[int], maxsize: int | None
) -> None:
    ours = _calls(stdlite.lru_cache(maxsize=maxsize), keys)
    assert ours == _calls(functools.lru_cache(maxsize=maxsize), keys)


@given(st.lists(st.integers(0, 6), max_size=40))
def test_cache_calls_through_once_per_arguments_as_functools_cache(keys: list[int]) -> None:
    assert _calls(stdlite.cache, keys) == _calls(functools.cache, keys)


def test_a_cached_function_keeps_its_name_doc_wrapped_and_can_be_cleared() -> None:
    calls = []

    def probe(x: int) -> int:
        """Probe."""
        calls.append(x)
        return x

    cached = stdlite.cache(probe)
    assert (cached.__name__, cached.__doc__, cached.__wrapped__) == ("probe", "Probe.", probe)
    assert [cached(1), cached(1)] == [1, 1] and calls == [1]
    cached.cache_clear()
    assert cached(1) == 1 and calls == [1, 1]
    assert stdlite.lru_cache(probe)(2) == 2  # (bare, as @lru_cache)


def test_cached_property_computes_once_and_keeps_the_value_on_the_instance() -> None:
    class Thing:
        computed = 0

        @stdlite.cached_property
        def value(self) -> int:
            """The value."""
            Thing.computed += 1
            return 42

    thing = Thing()
    assert (thing.value, thing.value, Thing.computed) == (42, 42, 1)
    assert thing.__dict__["value"] == 42
    assert Thing.__dict__["value"].__doc__ == "The value."
    assert isinstance(Thing.value, stdlite.cached_property)  # (from the class: the descriptor)


@pytest.mark.parametrize("raised", [KeyError, LookupError, ValueError, None])
def test_suppress_swallows_what_contextlib_suppress_swallows(raised: type | None) -> None:
    def outcome(suppress: Callable[..., contextlib.AbstractContextManager[None]]) -> str:
        try:
            with suppress(KeyError, IndexError):
                if raised is not None:
                    raise raised("x")
        except Exception as exc:
            return type(exc).__name__
        return "quiet"

    assert outcome(stdlite.suppress) == outcome(contextlib.suppress)


def test_closing_closes_on_leaving_the_block_even_on_an_error() -> None:
    class Closable:
        closed = False

        def close(self) -> None:
            self.closed = True

    thing = Closable()
    with pytest.raises(RuntimeError), stdlite.closing(thing) as entered:
        assert entered is thing
        raise RuntimeError
    assert thing.closed


def test_deque_and_mapping_proxy_are_the_interpreters_own() -> None:
    assert stdlite.deque is collections.deque
    assert stdlite.MappingProxyType is types.MappingProxyType


def test_auditing_a_small_wheel_imports_no_collections_functools_contextlib_array_csv_binascii(
    tmp_path: Path,
) -> None:
    """What stdlite stands in for stays out of a small wheel's audit, as the launcher starts
    it (array imports collections.abc, so collections; functools compiles a namedtuple), and
    so do csv's reader (RECORD without quotes is split at its commas), binascii (a few
    digests are encoded in Python) and, where libdeflate inflates, zlib."""
    wheel = small_extension_wheel(tmp_path) or make_wheel(tmp_path, {"small/__init__.py": b""})
    status, modules = modules_of_an_audit(wheel, tmp_path)
    assert status == "0", status
    assert "wheels.elf.symbols" in modules or "wheels.audit.directory" in modules
    unwanted = {"collections", "functools", "contextlib", "array", "types", "operator", "math"}
    unwanted |= {"_csv", "binascii", "bisect", "_bisect"}
    if "deflate" in modules:  # (libdeflate inflates, and its CRC-32 checks the metadata)
        unwanted.add("zlib")
    assert not unwanted & modules
