"""What the host must provide to build (and run) the stack, and how each provider is probed.

Every provider has the same shape (:mod:`builder.providers.probe`): candidates in upstream's
order -> the version, read from the most reliable source -> the first candidate satisfying the
manifest's specifier -> a :class:`ProviderResult`. Vendors declare theirs in ``providers()``.
"""

from builder.providers.probe import (
    ComponentNeeds,
    ProbeContext,
    Provider,
    ProviderResult,
    Purpose,
    PythonFacts,
    Selection,
    Status,
)

__all__ = [
    "ComponentNeeds",
    "ProbeContext",
    "Provider",
    "ProviderResult",
    "Purpose",
    "PythonFacts",
    "Selection",
    "Status",
]
