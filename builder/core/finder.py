"""Is a module on the path? Asked of the interpreter's path finder without importing importlib,
which imports warnings with it: 0.4 ms of a small wheel's audit, whose start-up asks it twice
(the launcher's choice to start without ``site``, and where auditwheel's policy data is)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


def find_spec(name: str) -> ModuleSpec | None:
    """``importlib.machinery.PathFinder.find_spec(name)``: where the top-level module ``name``
    is on ``sys.path``, without importing it; None where it is not."""
    for finder in sys.meta_path:
        if getattr(finder, "__name__", "") == "PathFinder":
            spec: ModuleSpec | None = finder.find_spec(name, None)
            return spec
    from importlib.machinery import PathFinder  # (a meta path without that class on it)

    return PathFinder.find_spec(name)
