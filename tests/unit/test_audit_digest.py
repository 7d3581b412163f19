"""RECORD digests of members: hashlib's digests, spelled as RECORD spells them, whether a
member is hashed in one piece or part by part on a helper thread."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys

import pytest

from wheels.audit import digests
from wheels.audit.raw import Task


def test_a_digest_is_urlsafe_base64_without_padding() -> None:
    assert digests.encoded(b"\xfb\xff\xbf" * 10 + b"\xfb\xff") == "-_-_" * 10 + "-_8"


def _task(algo: str) -> Task:
    return Task(0, "m", b"m", 0, 0, 0, 8, 0, algo)


@pytest.mark.parametrize("algo", ["sha256", "sha384", "sha512"])
@pytest.mark.parametrize("background", [False, True])
def test_a_member_hashed_in_parts_gets_the_digest_of_its_content(
    algo: str, background: bool
) -> None:
    data = bytes(range(256)) * 300
    digest = digests.Digest(algo, len(data), background=background)
    digest.add(data[:1000])
    digest.add(data[1000:])
    expected = digests.encoded(hashlib.new(algo, data).digest())
    assert digest.finish() == expected
    assert digests.digest_of(_task(algo), data) == expected


def test_what_a_tap_raised_beside_is_raised_where_the_digest_is_asked_for() -> None:
    digest = digests.Digest("sha256", 2, background=True)

    def tap(part: bytes) -> None:
        raise ValueError(part)

    digest.also.append(tap)
    digest.add(b"xy")
    with pytest.raises(ValueError):
        digest.finish()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's settings are glibc's")
def test_a_member_hashed_beside_keeps_the_heap_glibc_takes_the_settings() -> None:
    code = (
        "from wheels.audit import digests\n"
        "d = digests.Digest('sha256', 1, background=True); d.add(b'x'); d.finish()\n"
        "print(digests.keep_heap())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["True"]
