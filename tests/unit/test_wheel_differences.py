"""builder.pipeline.reproduce.require_identical: every member in which two wheels differ is
named, not only the first, so that one failed proof shows all that a fix must cover."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from builder.pipeline.reproduce import ReproducibilityError, differences, require_identical

FIXED = (2026, 8, 21, 0, 0, 0)


def wheel(path: Path, members: dict[str, tuple[bytes, tuple[int, ...]]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, (data, when) in members.items():
            zf.writestr(zipfile.ZipInfo(name, when), data)
    return path


def test_identical_wheels_have_no_differences(tmp_path: Path) -> None:
    members = {"pkg/a.py": (b"a = 1\n", FIXED)}
    a = wheel(tmp_path / "a.whl", members)
    b = wheel(tmp_path / "b.whl", members)
    assert differences(a, b) == []
    require_identical(a, b)  # does not raise


def test_every_differing_member_is_named_with_how_it_differs(tmp_path: Path) -> None:
    a = wheel(
        tmp_path / "x.whl",
        {
            "pkg/a.py": (b"a = 1\n", FIXED),
            "pkg/b.py": (b"b = 1\n", FIXED),
            "pkg/c.py": (b"c = 1\n", FIXED),
            "pkg/old.py": (b"", FIXED),
        },
    )
    b = wheel(
        tmp_path / "second.whl",
        {
            "pkg/a.py": (b"a = 2\n", FIXED),
            "pkg/b.py": (b"b = 1\n", (1980, 1, 1, 0, 0, 0)),
            "pkg/c.py": (b"c = 22\n", FIXED),
            "pkg/new.py": (b"", FIXED),
        },
    )
    found = differences(a, b)
    assert found == [
        "pkg/old.py: only in the first wheel",
        "pkg/new.py: only in the second wheel",
        "pkg/a.py: contents differ (same size, first difference at byte 4)",
        "pkg/b.py: date_time differs ((2026, 8, 21, 0, 0, 0) vs (1980, 1, 1, 0, 0, 0))",
        "pkg/c.py: contents differ (6 vs 7 bytes)",
    ]
    with pytest.raises(ReproducibilityError) as caught:
        require_identical(a, b)
    message = caught.value.message
    assert message.startswith("x.whl is not reproducible: two builds from the same inputs differ")
    assert "differ in 5 members:" in message
    assert all(f"\n  {line}" in message for line in found)


def test_members_in_another_order_are_a_difference(tmp_path: Path) -> None:
    one = {"a": (b"1", FIXED), "b": (b"2", FIXED)}
    a = wheel(tmp_path / "a.whl", one)
    b = wheel(tmp_path / "b.whl", dict(reversed(list(one.items()))))
    assert differences(a, b) == ["the members are in another order"]


def test_past_eight_members_the_rest_are_counted(tmp_path: Path) -> None:
    a = wheel(tmp_path / "a.whl", {f"m{i}": (b"x", FIXED) for i in range(11)})
    b = wheel(tmp_path / "b.whl", {f"m{i}": (b"y", FIXED) for i in range(11)})
    with pytest.raises(ReproducibilityError) as caught:
        require_identical(a, b)
    assert "differ in 11 members:" in caught.value.message
    assert caught.value.message.endswith("\n  and 3 more")
