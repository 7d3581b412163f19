"""RECORD digests of members: the builtin sha256 for a small wheel's members and hashlib's
for the rest give the same digests, spelled as RECORD spells them."""

from __future__ import annotations

import base64
import hashlib
import os
import platform
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wheels.audit import digests
from wheels.audit.raw import Task


def _kind(hasher: object) -> str:
    """Which sha256 made ``hasher``: OpenSSL's (hashlib's _hashlib) or the interpreter's own."""
    return "hashlib" if type(hasher).__module__ == "_hashlib" else "builtin"


def _printed_without_site(code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter started without ``site`` (as the
    launcher starts an audit), given this one's paths."""
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout.splitlines()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_a_digest_is_urlsafe_base64_without_padding(digest: bytes) -> None:
    assert digests.encoded(digest) == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=96))
def test_a_digest_encoded_in_python_is_what_base64_makes(digest: bytes) -> None:
    assert digests.encoded_here(digest) == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_the_first_digests_are_encoded_without_binascii_then_with_it() -> None:
    code = (
        "import sys\n"
        "from wheels.audit import digests\n"
        "n = digests.ENCODED_HERE\n"
        "out = [digests.encoded(bytes([i]) * 32) for i in range(n)]\n"
        "print(out[-1], 'binascii' in sys.modules)\n"
        "print(digests.encoded(bytes([n]) * 32), 'binascii' in sys.modules)\n"
    )
    lines = _printed_without_site(code)
    n = digests.ENCODED_HERE
    last_here, first_after = (
        base64.urlsafe_b64encode(bytes([i]) * 32).rstrip(b"=").decode() for i in (n - 1, n)
    )
    assert lines == [f"{last_here} False", f"{first_after} True"]


@pytest.mark.parametrize("algo", ["sha256", "sha384", "sha512"])
def test_either_hasher_gives_hashlibs_digest(algo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256)) * 300
    expected = hashlib.new(algo, data).digest()
    for loaded in (True, False):  # hashlib imported already, or not (as in a small audit)
        modules = dict(sys.modules)
        if not loaded:  # (OpenSSL's, which hashlib imports: _hashlib)
            modules.pop("hashlib")
            modules.pop("_hashlib")
        monkeypatch.setattr(sys, "modules", modules)
        monkeypatch.setattr(digests, "_builtin_left", [digests.BUILTIN_SHA256_BUDGET])
        hasher = digests.new_hash(algo, len(data))
        hasher.update(data[:1000])
        hasher.update(memoryview(data)[1000:])
        assert hasher.digest() == expected
        assert _kind(hasher) == ("builtin" if algo == "sha256" and not loaded else "hashlib")


def test_the_builtin_budget_is_spent_then_hashlib_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    modules = dict(sys.modules)
    modules.pop("hashlib")
    modules.pop("_hashlib")
    monkeypatch.setattr(sys, "modules", modules)
    budget = digests.BUILTIN_SHA256_BUDGET
    monkeypatch.setattr(digests, "_builtin_left", [budget])

    def kind(size: int) -> str:
        return _kind(digests.new_hash("sha256", size))

    assert [kind(budget // 2), kind(budget // 2), kind(1)] == ["builtin", "builtin", "hashlib"]
    monkeypatch.setattr(digests, "_builtin_left", [budget])
    assert kind(budget + 1) == "hashlib"  # one member over the whole budget: hashlib at once


def test_a_small_member_is_hashed_without_importing_hashlib() -> None:
    code = (
        "import sys, zlib\n"
        "from wheels.audit import digests\n"
        "h = digests.new_hash('sha256', 5); h.update(b'hello')\n"
        "print(digests.encoded(h.digest()), {'hashlib', '_hashlib'} & set(sys.modules) != set())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [digests.encoded(hashlib.sha256(b"hello").digest()), "False"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's settings are glibc's")
def test_a_member_hashed_beside_keeps_the_heap_glibc_takes_the_settings() -> None:
    code = (
        "from wheels.audit import digests\n"
        "d = digests.Digest('sha256', 1, background=True); d.add(b'x'); d.finish()\n"
        "print(digests.keep_heap())\n"
    )
    out = _printed_without_site(code)
    assert out == ["True"]


def _task(index: int, algo: str) -> Task:
    return Task(index, f"m{index}", b"m", 0, 0, 0, 8, 0, algo)


def test_members_hashed_later_get_the_digests_made_at_once() -> None:
    tasks = [_task(i, "sha256") for i in range(3)]
    contents = {0: b"a" * 1000, 2: bytearray(b"b" * (3 << 20))}
    kept = dict(contents)
    wait = digests.hash_later(tasks, kept)
    made = wait()
    assert made == {i: digests.digest_of(tasks[i], c) for i, c in contents.items()}
    assert kept == {}  # (each content let go once hashed)
    assert wait() is made


def test_what_hashing_later_raised_is_raised_where_the_digests_are_asked_for() -> None:
    tasks = [_task(0, "no-such-hash")]
    wait = digests.hash_later(tasks, {0: b"x"})
    with pytest.raises(ValueError):
        wait()
