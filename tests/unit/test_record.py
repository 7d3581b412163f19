"""wheels.record: record classes behave as the dataclasses they replace (init, defaults and
factories, repr, equality and hashing, frozenness, keyword-only fields, pickling), whether their
fields are bound in Python (a class's first records) or by the compiled ``__init__``."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wheels import record as record_module
from wheels.record import COMPILE_AFTER, FrozenError, field, fields, record, replace


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

    def compiled() -> bool:
        return Late.__init__.__code__.co_filename.startswith("<record")

    # An unpickled record is made without __init__: its first call may be any method.
    bare = object.__new__(Late)
    object.__setattr__(bare, "a", 1)
    object.__setattr__(bare, "b", "b")
    assert hash(bare) == hash(Late(1))
    assert bare == Late(1) and repr(bare).endswith(".Late(a=1, b='b')")
    with pytest.raises(FrozenError):
        bare.a = 2  # type: ignore[misc]
    made = [Late(i) for i in range(COMPILE_AFTER - 2)]  # with the two above, 32 in all
    assert not compiled()
    made.append(Late(99, b="c"))
    assert compiled()  # the 33rd record was made by the compiled __init__, now in place
    assert made[-1] == Late(99, "c") and made[:2] == [Late(0), Late(1)]

    @record
    class Mutable:
        a: int

    assert Mutable.__hash__ is None  # unhashable before anything is compiled, as dataclasses
    with pytest.raises(TypeError):
        hash(Mutable(1))


def test_a_call_that_does_not_fit_gets_pythons_own_error_at_once() -> None:
    @record(frozen=True)
    class Pair:
        a: int
        b: int = 0

    with pytest.raises(
        TypeError, match=r"Pair.__init__\(\) got an unexpected keyword argument 'c'"
    ):
        Pair(1, c=2)  # type: ignore[call-arg]
    assert Pair.__init__.__code__.co_filename.startswith("<record")


def test_a_field_without_a_default_after_one_with_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @record
        class Bad:
            a: int = 0
            b: int

    @record(kw_only=True)
    class Fine:  # keyword-only fields may come in any order, as in dataclasses
        a: int = 0
        b: int


NAMES = ("a", "b", "c", "d")
ARGUMENT = st.one_of(st.integers(-3, 3), st.none(), st.text(max_size=2))


@st.composite
def shapes_and_calls(
    draw: st.DrawFn,
) -> tuple[bool, bool, list[str], dict[str, str], tuple[object, ...], dict[str, object]]:
    """A record class's shape (frozen, keyword-only, its fields and which have a default or a
    factory) and a call, fitting or not: too many arguments, unknown or repeated keywords."""
    frozen, kw_only = draw(st.booleans()), draw(st.booleans())
    names = list(NAMES[: draw(st.integers(0, 4))])
    kinds = [draw(st.sampled_from(["none", "default", "factory"])) for _ in names]
    if not kw_only:  # fields with a default come last
        kinds.sort(key=lambda kind: kind != "none")
    args = tuple(draw(st.lists(ARGUMENT, max_size=5)))
    keys = draw(st.lists(st.sampled_from([*NAMES, "e"]), max_size=4, unique=True))
    kwargs = {key: draw(ARGUMENT) for key in keys}
    return frozen, kw_only, names, dict(zip(names, kinds, strict=True)), args, kwargs


def _class(frozen: bool, kw_only: bool, names: list[str], kinds: dict[str, str]) -> type:
    namespace: dict[str, object] = {"__annotations__": dict.fromkeys(names, "object")}
    for name, kind in kinds.items():
        if kind == "default":
            namespace[name] = f"default {name}"
        elif kind == "factory":
            namespace[name] = field(default_factory=list)
    made: type = record(type("Shape", (), namespace), frozen=frozen, kw_only=kw_only)
    return made


def _outcome(cls: type, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    try:
        return dict(vars(cls(*args, **kwargs)))
    except TypeError as error:
        return ("TypeError", str(error))


@settings(max_examples=400, deadline=None)
@given(shapes_and_calls())
def test_fields_bound_in_python_are_those_the_compiled_init_binds(
    case: tuple[bool, bool, list[str], dict[str, str], tuple[object, ...], dict[str, object]],
) -> None:
    frozen, kw_only, names, kinds, args, kwargs = case
    bound = _class(frozen, kw_only, names, kinds)
    limit = record_module.COMPILE_AFTER
    try:
        record_module.COMPILE_AFTER = 0
        other = _class(frozen, kw_only, names, kinds)
        other_outcome = _outcome(other, args, kwargs)
    finally:
        record_module.COMPILE_AFTER = limit
    assert other.__init__.__code__.co_filename.startswith("<record")
    outcome = _outcome(bound, args, kwargs)
    assert outcome == other_outcome
    if not isinstance(outcome, tuple):  # a fitting call was bound in Python
        assert not bound.__init__.__code__.co_filename.startswith("<record")
