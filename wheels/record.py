"""Record classes made the way :func:`dataclasses.dataclass` makes them, at a tenth of the cost.

``infini-stack audit`` of a small wheel takes less time than importing ``dataclasses`` (which
imports ``inspect``, and so ``ast``, ``dis`` and ``tokenize``) and compiling its six methods per
class, one ``exec`` each, for the forty classes an audit uses: a third of the command's time.
:func:`record` gives a class the same ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``
and, for frozen classes, ``__setattr__``/``__delattr__``; type checkers read it as a dataclass
(``dataclass_transform``). Only ``__init__`` is written for each class, and compiled once
:data:`COMPILE_AFTER` records of the class have been made (a small audit makes 34 of the 46
classes it imports, most of them once: their fields are bound in Python); the others are the
same few functions for every class, over its field names. What it does not do:
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
# Records of a class made before its ``__init__`` is compiled. Binding the fields in Python
# takes 1.5-2.5 us a record, the compiled ``__init__`` 0.5 us, and compiling it 60-80 us: a
# class made fewer times than this never pays for it. A small audit makes 34 classes, most of
# them once.
COMPILE_AFTER = 32


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


def _check_order(cls: type, names: list[str], defaults: dict[str, Any], kw_only: bool) -> None:
    """A field without a default after one with a default is refused, as dataclasses refuse it
    (the compiled ``__init__`` could not be written)."""
    if kw_only:
        return
    after_default = False
    for name in names:
        if name in defaults:
            after_default = True
        elif after_default:
            raise TypeError(
                f"{cls.__qualname__}: non-default argument {name!r} follows default argument"
            )


def _bind(
    names: list[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    defaults: dict[str, Any],
    factories: dict[str, Callable[[], Any]],
) -> list[Any] | None:
    """The field values of a call that fits the fields (positional arguments, then keywords,
    defaults and factories, in field order); None for any call that does not fit."""
    rest = names[len(args) :]
    if kwargs and len(kwargs) != sum(1 for n in rest if n in kwargs):
        return None  # an unknown keyword, or one a positional argument already gave
    values = list(args)
    for name in rest:
        if name in kwargs:
            values.append(kwargs[name])
        elif name in defaults:
            values.append(defaults[name])
        elif name in factories:
            values.append(factories[name]())
        else:
            return None
    return values


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenError(f"cannot assign to {name}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenError(f"cannot delete {name}")


def _methods(cls: type, names: list[str], frozen: bool, eq: bool) -> dict[str, Any]:
    """``__repr__``, ``__eq__``, ``__hash__`` and the frozen guards: the same for every class
    but for its field names, so written once here (only ``__init__`` is compiled per class)."""
    from _operator import attrgetter  # (operator.py imports it from there)

    get = attrgetter(*names) if names else None

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
    _check_order(cls, names, defaults, kw_only)
    plain = {n: v for n, v in defaults.items() if n not in factories}
    positional = 0 if kw_only else len(names)
    made = 0

    def compiled() -> Callable[..., None]:
        # exec of the text, not of compile()'s code: the builtin compile() makes the
        # interpreter build its ast module's types first (PyAST_Check), 1.4 ms in a process
        # that has not (compile() 1.45 ms, exec 0.03 ms, of "x=1" in a fresh interpreter).
        exec(source, scope)
        init: Callable[..., None] = scope["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        init.__code__ = init.__code__.replace(co_filename=f"<record {cls.__qualname__}>")
        setattr(cls, "__init__", init)  # noqa: B010
        return init

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        """The fields bound here for the first records of the class, and by a compiled
        ``__init__`` after :data:`COMPILE_AFTER` of them (or at once for a call that does not
        fit, so that Python's own error says why)."""
        nonlocal made
        made += 1
        values = None
        if made <= COMPILE_AFTER and len(args) <= positional:
            values = _bind(names, args, kwargs, plain, factories)
        if values is None:
            compiled()(self, *args, **kwargs)
        elif frozen:
            self.__dict__.update(zip(names, values, strict=True))
        else:
            for name, value in zip(names, values, strict=True):
                setattr(self, name, value)

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
