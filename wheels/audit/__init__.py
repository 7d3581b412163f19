"""The complete wheel audit: every ELF in a wheel, what it needs, where each need resolves.

One pass over the archive: each member is read raw from the zip, inflated once in bounded
steps while its RECORD hash is computed, and ELF members are decoded from the inflated parts in
memory (:mod:`wheels.elf`). Big wheels are spread over processes, largest members first.

Checks, per ELF: identity; each DT_NEEDED resolved through RUNPATH into the wheel, into another
distribution (which must be a Requires-Dist), to a manylinux system library or to a library the
vendor expects on the machine; the needs of another distribution's library that only the wheel
can make it find (:mod:`wheels.loading`); libpython absent (not needed, not linked in
statically); the extension's ``PyInit_<name>``; every undefined symbol bound by the libraries it
loads; the imports a package must run first for what it loads from other distributions; a
private C++ runtime that C++ symbols cross; the CUDA device code against the declared
architectures. Per wheel: archive hygiene, RECORD, and the platform tag against auditwheel's
rules (:mod:`wheels.policy`).

The modules, in the order an audit runs through them:

- :mod:`~wheels.audit.core`: :func:`audit_wheel`, start to end;
- :mod:`~wheels.audit.members`: a member read, inflated, hashed, ELF-decoded;
- :mod:`~wheels.audit.cache`: those results kept per batch;
- :mod:`~wheels.audit.pool`: the batches, and the processes for big wheels;
- :mod:`~wheels.audit.archive`: zip hygiene, dist-info, WHEEL, METADATA, RECORD;
- :mod:`~wheels.audit.ldso`: the ld.so model (RUNPATH, resolution, load groups);
- :mod:`~wheels.audit.scopes`: load scopes, stranded needs, symbol closure;
- :mod:`~wheels.audit.preloads`: what packages import first, and what that makes global;
- :mod:`~wheels.audit.cxx`: private C++ runtimes that C++ symbols cross;
- :mod:`~wheels.cuda.audit`: CUDA device code against architectures and runtime;
- :mod:`~wheels.audit.elfs`: the per-ELF checks and reports;
- :mod:`~wheels.audit.tags`: the declared platform tag against the verdict;
- :mod:`~wheels.audit.findings`: what all of them report into.
"""

from wheels.audit.core import audit_wheel, default_cache_dir, infer_vendor
from wheels.audit_report import WheelAudit, render_text, to_json

__all__ = [
    "WheelAudit",
    "audit_wheel",
    "default_cache_dir",
    "infer_vendor",
    "render_text",
    "to_json",
]
