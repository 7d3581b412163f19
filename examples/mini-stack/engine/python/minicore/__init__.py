"""MiniLM's Python package: a thin layer over the native module ``_minicore``."""

from minicore._minicore import add, allreduce_sum, backends, ops, vendor

__all__ = ["add", "allreduce_sum", "backends", "ops", "vendor"]
