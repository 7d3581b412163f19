"""wheels.record: record classes behave as the dataclasses they replace (init, defaults and
factories, repr, equality and hashing, frozenness, keyword-only fields, pickling)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from wheels.record import FrozenError, field, fields, record, replace


@record(frozen=True)
class Point:
    """A frozen record."""

    x: int
    y: int = 2
    tags: list[str] = field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class DataPoint:
    """The same, as a dataclass."""

    x: int
    y: int = 2
    tags: list[str] = dataclasses.field(default_factory=list)


@record
class Box:
    """A mutable record."""

    items: dict[str, int] = field(default_factory=dict)
    label: str | None = None


@record(frozen=True, kw_only=True)
class Named:
    """Keyword arguments only."""

    name: str
    size: int = 0


def test_records_initialise_show_and_compare_as_dataclasses_do() -> None:
    for args, kwargs in [((1,), {}), ((1, 5), {}), ((1,), {"tags": ["a"]}), ((), {"x": 3})]:
        ours, theirs = Point(*args, **kwargs), DataPoint(*args, **kwargs)
        assert repr(ours).replace("Point", "X") == repr(theirs).replace("DataPoint", "X")
        assert (ours.x, ours.y, ours.tags) == (theirs.x, theirs.y, theirs.tags)
    assert Point(1) == Point(1, 2, []) and Point(1) != Point(2)
    assert Point(1) != DataPoint(1)
    assert (
        fields(Point) == ("x", "y", "tags") == tuple(f.name for f in dataclasses.fields(DataPoint))
    )
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_factories_make_a_new_default_for_each_record() -> None:
    a, b = Box(), Box()
    a.items["x"] = 1
    assert b.items == {} and a.items == {"x": 1}
    assert Point(1).tags is not Point(1).tags


def test_frozen_records_refuse_assignment_and_hash_by_value() -> None:
    p = Point(1)
    assert isinstance(FrozenError("x"), AttributeError)
    with pytest.raises(FrozenError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert {Named(name="a"): 1}[Named(name="a", size=0)] == 1
    assert hash(Named(name="a")) == hash(Named(name="a")) != hash(Named(name="b"))
    with pytest.raises(TypeError):
        hash(Point(1))  # a list field is unhashable, as in a dataclass
    with pytest.raises(TypeError):
        hash(Box())  # mutable records, like dataclasses with eq, are unhashable


def test_keyword_only_records_take_no_positional_arguments() -> None:
    assert Named(name="a") == Named(name="a", size=0)
    with pytest.raises(TypeError):
        Named("a")  # type: ignore[misc]


def test_records_survive_pickling() -> None:
    for value in (Point(1, 4, ["t"]), Box({"a": 1}, "l"), Named(name="n", size=3)):
        assert pickle.loads(pickle.dumps(value)) == value


def test_replace_copies_a_record_with_some_fields_changed() -> None:
    p = Point(1, 3, ["a"])
    assert replace(p, y=4) == Point(1, 4, ["a"]) and p.y == 3
    assert replace(Named(name="a"), size=2) == Named(name="a", size=2)


def test_methods_are_compiled_on_first_use_whichever_method_comes_first() -> None:
    @record(frozen=True)
    class Late:
        a: int
        b: str = "b"

    assert not Late.__init__.__code__.co_filename.startswith("<record")  # not compiled yet
    # An unpickled record is made without __init__: its first call may be any method.
    bare = object.__new__(Late)
    object.__setattr__(bare, "a", 1)
    object.__setattr__(bare, "b", "b")
    assert hash(bare) == hash(Late(1))
    assert Late.__init__.__code__.co_filename.startswith("<record")  # compiled once, in place
    assert bare == Late(1) and repr(bare).endswith(".Late(a=1, b='b')")
    with pytest.raises(FrozenError):
        bare.a = 2  # type: ignore[misc]

    @record
    class Mutable:
        a: int

    assert Mutable.__hash__ is None  # unhashable before anything is compiled, as dataclasses
    with pytest.raises(TypeError):
        hash(Mutable(1))
