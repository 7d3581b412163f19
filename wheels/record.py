"""Record classes made the way :func:`dataclasses.dataclass` makes them, at a tenth of the cost.

``infini-stack audit`` of a small wheel takes less time than importing ``dataclasses`` (which
imports ``inspect``, and so ``ast``, ``dis`` and ``tokenize``) and compiling its six methods per
class, one ``exec`` each, for the forty classes an audit uses: a third of the command's time.
:func:`record` gives a class the same ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``
and, for frozen classes, ``__setattr__``/``__delattr__``; type checkers read it as a dataclass
(``dataclass_transform``). Only ``__init__`` is written for each class, and compiled when the
first record of the class is made (a small audit makes 34 of the 46 classes it imports); the
others are the same few functions for every class, over its field names. What it does not do:
inheritance of fields, ``ClassVar``, ordering, ``slots``; :func:`field` takes only
``default_factory``.
tests/unit/test_record.py holds its classes to behave as dataclasses' do.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_kwargs: object) -> object:
        return lambda decorated: decorated


class FrozenError(AttributeError):
    """An assignment to a field of a frozen record (dataclasses' FrozenInstanceError)."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


_MISSING = object()


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is made anew for each record (as dataclasses.field)."""
    made: T = _Factory(default_factory)  # type: ignore[assignment]
    return made  # typed as the default it makes, as dataclasses.field is


def fields(cls: type) -> tuple[str, ...]:
    """The field names of a record class, in order (dataclasses.fields, names only)."""
    names: tuple[str, ...] = cls.__dict__["__record_fields__"]
    return names


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with some fields changed (dataclasses.replace)."""
    values = {n: getattr(obj, n) for n in fields(type(obj))}
    made: T = type(obj)(**{**values, **changes})
    return made


def _init(cls: type, names: list[str], frozen: bool, kw_only: bool) -> list[str]:
    params, body = [], []
    for name in names:
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, _Factory):
            params.append(f"{name}=_MISSING")
            body.append(f"    if {name} is _MISSING: {name} = _factories[{name!r}]()")
            delattr(cls, name)
        elif value is not _MISSING:
            params.append(f"{name}=_defaults[{name!r}]")
        else:
            params.append(name)
    # A frozen record's fields go straight into its __dict__ (what object.__setattr__ would do
    # there, at a third of the cost: the audit makes a few records per member).
    store = "_d[{0!r}] = {0}" if frozen else "self.{0} = {0}"
    if frozen and names:
        body.append("    _d = self.__dict__")
    body += [f"    {store.format(n)}" for n in names] or ["    pass"]
    head = ", ".join((["*"] if kw_only and params else []) + params)
    return [f"def __init__(self{', ' if head else ''}{head}) -> None:", *body]


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenError(f"cannot assign to {name}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenError(f"cannot delete {name}")


def _methods(cls: type, names: list[str], frozen: bool, eq: bool) -> dict[str, Any]:
    """``__repr__``, ``__eq__``, ``__hash__`` and the frozen guards: the same for every class
    but for its field names, so written once here (only ``__init__`` is compiled per class)."""
    import operator

    get = operator.attrgetter(*names) if names else None

    def key(self: object) -> tuple[object, ...]:
        if get is None:
            return ()
        values = get(self)
        return values if len(names) > 1 else (values,)

    def __repr__(self: object) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__qualname__}({shown})"

    out: dict[str, Any] = {"__repr__": __repr__}
    if eq:

        def __eq__(self: object, other: object) -> Any:
            return key(self) == key(other) if other.__class__ is self.__class__ else NotImplemented

        def __hash__(self: object) -> int:
            return hash(key(self))

        out["__eq__"] = __eq__
        out["__hash__"] = __hash__ if frozen else None  # as dataclasses: mutable, unhashable
    if frozen:
        out["__setattr__"], out["__delattr__"] = _frozen_setattr, _frozen_delattr
    return out


def _make(cls: type[T], frozen: bool, kw_only: bool, eq: bool) -> type[T]:
    names = list(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 (inspect is the cost)
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    factories = {n: v.make for n, v in defaults.items() if isinstance(v, _Factory)}
    source = "\n".join(_init(cls, names, frozen, kw_only))
    scope: dict[str, Any] = {
        "_MISSING": _MISSING,
        "_defaults": defaults,
        "_factories": factories,
    }
    # What the class defines itself stays (its own __hash__, __reduce__, __eq__...).
    for name, value in _methods(cls, names, frozen, eq).items():
        if name not in cls.__dict__:
            if callable(value):
                value.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, value)
    setattr(cls, "__record_fields__", tuple(names))  # noqa: B010 (not a declared attribute)
    setattr(cls, "__match_args__", tuple(names))  # noqa: B010
    if "__init__" in cls.__dict__:
        return cls

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        """Compiled on the first record made: most classes an import defines are never made
        in a short run, and one ``compile`` costs more than the rest of the class."""
        exec(compile(source, f"<record {cls.__qualname__}>", "exec"), scope)
        init = scope["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        setattr(cls, "__init__", init)  # noqa: B010
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    setattr(cls, "__init__", __init__)  # noqa: B010
    return cls


@dataclass_transform(field_specifiers=(field,))
def record(
    cls: type[T] | None = None,
    /,
    *,
    frozen: bool = False,
    kw_only: bool = False,
    eq: bool = True,
) -> Any:
    """``@record`` or ``@record(frozen=True, kw_only=..., eq=...)``, as ``@dataclass``."""
    if cls is None:
        return lambda c: _make(c, frozen, kw_only, eq)
    return _make(cls, frozen, kw_only, eq)
