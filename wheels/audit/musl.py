"""musl's loader, where it differs from glibc's: the names it answers with itself, and the host
libraries a musllinux wheel may be checked against (never this host's glibc)."""

from __future__ import annotations

import glob

from wheels.elf import HostLibraries
from wheels.policy.lddtree import host_library_dirs

# musl's ldso/dynlink.c (load_library): a name "lib" + one of these + "." is the C library
# itself, however the rest of it reads (libc.so, libc.musl-x86_64.so.1, libpthread.so.0,
# libm.so.6), as is the loader's own name.
_SELF = (*(f"lib{n}." for n in ("c", "pthread", "rt", "m", "dl", "util", "xnet")), "ld-musl-")


def is_musl_self(soname: str) -> bool:
    """Does musl's loader resolve ``soname`` to the C library itself?"""
    return soname.startswith(_SELF)


def host_is_musl() -> bool:
    return bool(glob.glob("/lib/ld-musl-*.so.1"))


def musl_host() -> HostLibraries:
    """The libraries a musl wheel binds against here: the host's when the host runs musl,
    none on a glibc host (whose libc.so.6 a musl wheel never loads)."""
    return HostLibraries(host_library_dirs("musl") if host_is_musl() else ())
