"""The few helpers of functools and contextlib that the audit uses, without importing them.

In a Python whose extension modules are shared libraries (pyenv's, python.org's builds),
those imports cost more than their use: functools 3.3 ms (it imports collections, and compiles
the first code of the process for a namedtuple), contextlib 4.7 ms, collections 2.6 ms,
``array`` 3.1 ms (it imports ``collections.abc``), ``types`` 0.3 ms, against 37 ms for the
whole audit of a small wheel (``python -S -c 'import functools'`` against ``-c pass``, medians
of 30, this machine).

These do what the audit asks of them and no more. Type checkers see functools' and contextlib's
own, whose behaviour these keep: ``tests/unit/test_stdlite.py`` holds them to it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import deque
    from contextlib import closing, suppress
    from functools import cache, cached_property, lru_cache
    from types import MappingProxyType
else:
    from _collections import deque  # (collections' own, without the rest of collections)

    MappingProxyType = type(type.__dict__)  # (types' own definition; types costs 0.3 ms)
    _KWARGS = object()  # separates positional from keyword arguments in a cache key

    class _Cached:
        """A function's results by its arguments; at most ``maxsize`` of them, the least
        recently used dropped first (functools.lru_cache, untyped)."""

        def __init__(self, func, maxsize):
            self.__wrapped__ = func
            self.__name__ = func.__name__
            self.__qualname__ = func.__qualname__
            self.__module__ = func.__module__
            self.__doc__ = func.__doc__
            self._maxsize = maxsize
            self._results = {}

        def __call__(self, *args, **kwargs):
            key = (*args, _KWARGS, *kwargs.items()) if kwargs else args
            results = self._results
            if key in results:
                if self._maxsize is not None:  # (now the most recently used)
                    results[key] = results.pop(key)
                return results[key]
            value = self.__wrapped__(*args, **kwargs)
            if self._maxsize is not None and len(results) >= self._maxsize:
                if self._maxsize <= 0:
                    return value
                del results[next(iter(results))]
            results[key] = value
            return value

        def cache_clear(self):
            self._results.clear()

    def cache(func):
        return _Cached(func, None)

    def lru_cache(maxsize=128):
        if callable(maxsize):  # (used bare, as @lru_cache)
            return _Cached(maxsize, 128)
        return lambda func: _Cached(func, maxsize)

    class cached_property:
        """Computed on first access, then kept in the instance's ``__dict__``."""

        def __init__(self, func):
            self.func = func
            self.attrname = None
            self.__doc__ = func.__doc__

        def __set_name__(self, owner, name):
            self.attrname = name

        def __get__(self, instance, owner=None):
            if instance is None:
                return self
            value = instance.__dict__[self.attrname] = self.func(instance)
            return value

    class suppress:
        """Leaves the block quietly on any of ``exceptions``."""

        def __init__(self, *exceptions):
            self._exceptions = exceptions

        def __enter__(self):
            return None

        def __exit__(self, kind, value, traceback):
            return kind is not None and issubclass(kind, self._exceptions)

    class closing:
        """Calls ``thing.close()`` on leaving the block."""

        def __init__(self, thing):
            self.thing = thing

        def __enter__(self):
            return self.thing

        def __exit__(self, kind, value, traceback):
            self.thing.close()


__all__ = [
    "MappingProxyType",
    "cache",
    "cached_property",
    "closing",
    "deque",
    "lru_cache",
    "suppress",
]
