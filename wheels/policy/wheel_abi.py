"""The manylinux/musllinux verdict: the most compatible platform tag a wheel's ELF files allow
(mirrors ``auditwheel/wheel_abi.py``).

:func:`platform_verdict` follows auditwheel's ``analyze_wheel_abi`` step by step (symbol-version
limits per policy, whitelisted libraries, blacklisted symbols, ISA extensions, the rule that a
library outside the wheel and outside the whitelist means ``linux_<arch>``), over ELF data read
in memory instead of an unpacked wheel.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from wheels.elf import ElfInfo, HostLibraries
from wheels.policy.elfutils import add_version_needs, python_extension
from wheels.policy.lddtree import Files, Lib, Tree, ldd
from wheels.policy.manylinux import (
    Ref,
    Unsupported,
    external_refs,
    host_has_musl_libc,
    is_superset,
    policies_for,
)
from wheels.policy.wheeltools import wheel_platform

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any


@dataclass(frozen=True)
class TagVerdict:
    """The most compatible platform tag the ELF files allow, and why not a better one."""

    tag: str | None
    libc: str | None
    arch: str | None
    priorities: Mapping[str, int]
    reasons: tuple[str, ...]
    external: tuple[str, ...]
    error: str | None = None
    # PEP 600: the libc version every ELF file needs (None: no manylinux/musllinux tag fits, or
    # not known); a wheel whose ELF files need no libc at all (static executables) fits any.
    needs: tuple[int, int] | None = None
    libc_free: bool = False
    glibc: tuple[int, int] | None = None  # the newest GLIBC_X.Y symbol version needed

    @property
    def family(self) -> str:
        return "musllinux" if self.libc == "musl" else "manylinux"

    def allows(self, declared: str) -> bool | None:
        """Whether ``declared`` (a platform tag) claims no more than the ELF files need, as PEP
        600 defines the tag (``manylinux_X_Y``: glibc X.Y or newer), whether or not auditwheel
        has a policy of that name; None: unknown."""
        if self.tag is None:
            return None
        if declared.startswith("linux_"):
            return True
        wanted = pep600(declared)
        if wanted is None or (self.arch is not None and wanted[2] != self.arch):
            return None
        if self.libc_free:
            return True
        if wanted[0] != self.family:
            return None
        have = pep600(self.tag)
        needs = self.needs or (have[1] if have is not None else None)
        if needs is None:  # linux_<arch>: no tag of the family fits
            return False if self.tag.startswith("linux_") else None
        return wanted[1] >= needs

    def pep600_tag(self) -> str | None:
        """The most compatible tag by PEP 600: ``manylinux_2_25_x86_64`` for GLIBC_2.25."""
        if self.needs is None or self.arch is None:
            return self.tag
        return f"{self.family}_{self.needs[0]}_{self.needs[1]}_{self.arch}"

    def has_policy(self, tag: str) -> bool:
        """Does auditwheel have a policy of this name (or alias)?"""
        return tag in self.priorities


_LEGACY = {"manylinux1_": (2, 5), "manylinux2010_": (2, 12), "manylinux2014_": (2, 17)}
_PEP600 = re.compile(r"^(manylinux|musllinux)_(\d+)_(\d+)_(.+)$")


def pep600(tag: str) -> tuple[str, tuple[int, int], str] | None:
    """(family, libc version, arch) of a ``manylinux_X_Y_ARCH``/``musllinux_X_Y_ARCH`` tag, or
    of a legacy alias (``manylinux2014_x86_64`` is ``manylinux_2_17_x86_64``, PEP 600)."""
    for prefix, version in _LEGACY.items():
        if tag.startswith(prefix):
            return "manylinux", version, tag[len(prefix) :]
    match = _PEP600.match(tag)
    return (match[1], (int(match[2]), int(match[3])), match[4]) if match else None


def platform_verdict(
    wheel_name: str,
    members: Mapping[str, ElfInfo | None],
    order: Sequence[str],
    host: HostLibraries,
    exclude: Callable[[str], bool] = lambda _: False,
    every_musl: bool = False,
) -> TagVerdict:
    """The platform tag ``auditwheel show`` would give (``exclude`` as its ``--exclude``).

    ``members`` maps every file of the wheel to its ELF data (None: not an ELF file); ``order``
    is the RECORD order, in which auditwheel visits files. ``every_musl``: judged against every
    musllinux policy (see :func:`~wheels.policy.manylinux.manylinux_policies`).
    """
    files = Files(members, host)
    try:
        data = _collect(wheel_name, members, order, files, exclude, every_musl)
        return _analyze(data, host)
    except Unsupported as exc:
        arch, libc, _ = wheel_platform(wheel_name)
        return TagVerdict(None, libc, arch, {}, (), (), error=str(exc))


@dataclass
class _ElfData:
    """auditwheel's get_wheel_elfdata result."""

    policies: Any
    arch: str
    full: dict[str, Tree]
    refs: dict[str, dict[str, Ref]]
    versioned: dict[str, set[str]]
    ucs2: bool
    pyfpe: bool
    libc_free: bool = False  # no ELF names an interpreter or needs a library


class _Collector:
    """auditwheel's get_wheel_elfdata, one file at a time."""

    def __init__(
        self, wheel_name: str, files: Files, exclude: Callable[[str], bool], every_musl: bool
    ) -> None:
        self.every_musl = every_musl
        self.libc_free = True
        self.arch, self.libc, self.pure = wheel_platform(wheel_name)
        if self.libc == "android":
            raise Unsupported("Android wheels are not audited here")
        self.files, self.exclude = files, exclude
        self.policies: Any = None
        self.py: dict[str, Tree] = {}
        self.nonpy: dict[str, Tree] = {}
        self.refs: dict[str, dict[str, Ref]] = {}
        self.versioned: dict[str, set[str]] = {}
        self.ucs2 = self.pyfpe = self.platform_wheel = False
        self.purelib: list[str] = []

    def visit(self, path: str, info: ElfInfo) -> None:
        if "purelib" in path.split("/")[:-1]:
            self.purelib.append(posixpath.basename(path))
        if self.purelib:
            return
        tree = ldd(path, info, self.files, self.exclude)
        if info.arch is None or (self.arch is not None and info.arch != self.arch):
            return
        self.arch = self.arch or info.arch
        if tree.libc is not None:
            if self.libc is not None and self.libc != tree.libc:
                return
            self.libc = tree.libc
        if self.policies is None and self.libc is not None:
            self.policies = policies_for(self.libc, self.arch, self.every_musl)
        self.platform_wheel = True
        self.libc_free = self.libc_free and not info.interpreter and not info.needed
        add_version_needs(self.versioned, info)
        kind = python_extension(path, info)
        if kind is None:
            self.nonpy[path] = tree
            return
        if self.policies is None:
            raise Unsupported(f"cannot tell the libc of the Python extension {path}")
        self.py[path] = tree
        self.pyfpe |= info.uses_pyfpe
        self.ucs2 |= kind == 2 and info.uses_ucs2
        self.refs[path] = external_refs(self.policies, tree)

    def finish(self) -> _ElfData:
        if self.purelib:
            raise Unsupported("shared libraries in purelib: " + ", ".join(self.purelib))
        if not self.platform_wheel or self.arch is None:
            raise Unsupported(
                "pure wheel: no ELF file"
                if self.pure
                else "no ELF file for the wheel's architecture"
            )
        _fixup(self.py, self.nonpy)
        needed = {lib for t in (*self.py.values(), *self.nonpy.values()) for lib in t.needed}
        policies = self.policies or policies_for(_host_libc(), self.arch)
        full = dict(self.py)
        for path, tree in self.nonpy.items():
            if posixpath.basename(path) not in needed:
                full[path] = tree
            self.refs[path] = external_refs(policies, tree)
        return _ElfData(
            policies,
            self.arch,
            full,
            self.refs,
            self.versioned,
            self.ucs2,
            self.pyfpe,
            self.libc_free,
        )


def _collect(
    wheel_name: str,
    members: Mapping[str, ElfInfo | None],
    order: Sequence[str],
    files: Files,
    exclude: Callable[[str], bool],
    every_musl: bool = False,
) -> _ElfData:
    collector = _Collector(wheel_name, files, exclude, every_musl)
    for path in order:
        info = members.get(path)
        if not path.endswith(".py") and info is not None:
            collector.visit(path, info)
    return collector.finish()


def _host_libc() -> str:
    if not host_has_musl_libc():
        return "glibc"  # (as auditwheel's Libc.detect() finds)
    from auditwheel.libc import Libc

    return str(Libc.detect().value)


def _fixup(py: Mapping[str, Tree], nonpy: dict[str, Tree]) -> None:
    """auditwheel's _fixup_elf_trees: borrow resolutions from a fully resolved tree."""
    resolved = [
        t
        for t in (*py.values(), *nonpy.values())
        if all(lib.realpath is not None for lib in t.libraries.values())
    ]
    for path, tree in list(nonpy.items()):
        if all(lib.realpath is not None for lib in tree.libraries.values()):
            continue
        ref = next(
            (
                c
                for c in resolved
                for lib in c.libraries.values()
                if lib.in_wheel and lib.realpath == path
            ),
            None,
        )
        if ref is None:
            continue
        new: dict[str, Lib] = {}
        known = set(tree.libraries)
        for soname, lib in tree.libraries.items():
            if lib.realpath is None and soname in ref.libraries:
                new[soname] = ref.libraries[soname]
                pending = set(new[soname].needed) - known
                while pending:
                    known |= pending
                    for name in list(pending):
                        if name in ref.libraries:
                            new[name] = ref.libraries[name]
                            pending |= set(new[name].needed)
                    pending -= known
            else:
                new[soname] = lib
        nonpy[path] = Tree(tree.path, tree.info, tree.libc, tree.needed, new)


def _analyze(data: _ElfData, host: HostLibraries) -> TagVerdict:
    """auditwheel's analyze_wheel_abi with allow_graft=False, as ``show`` runs it."""
    policies = data.policies
    refs = {p.name: Ref({}, {}, p) for p in policies}
    for path in data.full:
        for name, ref in data.refs[path].items():
            for lib, syms in ref.blacklist.items():
                refs[name].blacklist[lib] = sorted({*refs[name].blacklist.get(lib, ()), *syms})
            refs[name].libs.update(ref.libs)
    external: dict[str, str] = {}
    for ref in refs.values():
        if ref.policy.priority:
            for lib, real in ref.libs.items():
                if real:
                    external.setdefault(real, lib)
    symbol_policy = _symbol_policy(policies, data.versioned, refs, external, host)
    ref_policy = max((r.policy for r in refs.values() if not r.libs), default=policies.linux)
    black_policy = max((r.policy for r in refs.values() if not r.blacklist), default=policies.linux)
    machine = _machine_policy(data, frozenset(external.values()))
    ucs = policies.linux if data.ucs2 else policies.highest
    pyfpe = policies.linux if data.pyfpe else policies.highest
    overall = min(symbol_policy, ucs, pyfpe, black_policy, machine, ref_policy)
    reasons = _reasons(data, refs, symbol_policy, black_policy, machine, ucs, pyfpe)
    priorities = {name: p.priority for p in policies for name in (p.name, *p.aliases)}
    libc = "musl" if policies.libc == "musl" else "glibc"
    others = min(ucs, pyfpe, black_policy, machine, ref_policy, _beyond_glibc(data))
    return TagVerdict(
        overall.name,
        libc,
        data.arch,
        MappingProxyType(priorities),
        tuple(reasons),
        tuple(sorted(refs[policies.highest.name].libs)),
        needs=_needs(others, data.versioned, policies.linux),
        libc_free=data.libc_free,
        glibc=glibc_needed(data.versioned),
    )


_GLIBC_VERSION = re.compile(r"^GLIBC_(\d+)\.(\d+)")


def glibc_version(version: str) -> tuple[int, int] | None:
    """(X, Y) of a symbol version that starts ``GLIBC_X.Y``; None for any other."""
    match = _GLIBC_VERSION.match(version)
    return (int(match[1]), int(match[2])) if match else None


def glibc_needed(versioned: Mapping[str, set[str]]) -> tuple[int, int] | None:
    """The newest ``GLIBC_X.Y`` version any ELF file needs, as PEP 600 compares it."""
    found = [g for vs in versioned.values() for v in vs if (g := glibc_version(v))]
    return max(found, default=None)


def _beyond_glibc(data: _ElfData) -> Any:
    """The best policy for the symbol versions other than glibc's own (GLIBCXX, CXXABI, GCC,
    GLIBC_PRIVATE): those are held to the policies' lists, which is all PEP 600 gives them."""
    rest = {k: {v for v in vs if not glibc_version(v)} for k, vs in data.versioned.items()}
    return data.policies.versioned_symbols_policy(rest)


def _needs(others: Any, versioned: Mapping[str, set[str]], linux: Any) -> tuple[int, int] | None:
    """PEP 600's verdict: the libc version the ELF files need, the newest of their glibc symbol
    versions and of what every other rule leaves; None when a rule leaves no tag."""
    if others == linux:
        return None
    floor = pep600(others.name)
    if floor is None:
        return None
    glibc = glibc_needed(versioned) if floor[0] == "manylinux" else None
    return max(floor[1], glibc) if glibc is not None else floor[1]


def _symbol_policy(
    policies: Any,
    versioned: Mapping[str, set[str]],
    refs: Mapping[str, Ref],
    external: Mapping[str, str],
    host: HostLibraries,
) -> Any:
    ext_versions: dict[str, dict[str, set[str]]] = {}
    for real, soname in external.items():
        info = host.read(real)
        if info is None:
            continue
        per: dict[str, set[str]] = {}
        add_version_needs(per, info)
        ext_versions[soname] = per
    candidates = []
    for ref in refs.values():
        if not ref.policy.priority:
            continue
        merged = {k: set(v) for k, v in versioned.items()}
        for soname in ref.libs:
            for k, v in ext_versions.get(soname, {}).items():
                merged.setdefault(k, set()).update(v)
        candidates.append(min(ref.policy, policies.versioned_symbols_policy(merged)))
    return max(candidates, default=policies.versioned_symbols_policy(dict(versioned)))


def _machine_policy(data: _ElfData, external_sonames: frozenset[str]) -> Any:
    """auditwheel's _get_machine_policy: ISA extensions beyond the wheel's architecture."""
    policies = data.policies
    result = policies.highest
    checks: dict[str, tuple[str | None, ElfInfo]] = {}
    for path, tree in data.full.items():
        checks.setdefault(path, (None, tree.info))
        for dep in tree.libraries.values():
            if dep.soname in external_sonames and dep.realpath is not None and dep.info:
                checks.setdefault(dep.realpath, (dep.soname, dep.info))
    for path, (soname, info) in checks.items():
        if info.isa_error:
            raise Unsupported(f"{path}: unknown x86_64 ISA level in its GNU property note")
        if info.isa_ext is None or is_superset(policies.architecture, info.isa_ext):
            continue
        if soname is not None:
            found = max((p for p in policies if soname in p.whitelist), default=policies.linux)
            if policies.linux.priority < found.priority:
                result = min(result, found)
                continue
        result = policies.linux
    return result


def _reasons(
    data: _ElfData,
    refs: Mapping[str, Ref],
    symbol_policy: Any,
    black_policy: Any,
    machine: Any,
    ucs: Any,
    pyfpe: Any,
) -> list[str]:
    policies = data.policies
    top = policies.highest
    out: list[str] = []
    libs = refs[top.name].libs
    if libs:
        out.append(
            "needs libraries neither in the wheel nor whitelisted: " + ", ".join(sorted(libs))
        )
    if symbol_policy < top:
        better = min((p for p in policies if p > symbol_policy), default=top)
        beyond = sorted(
            v
            for vs in data.versioned.values()
            for v in vs
            if v.partition("_")[0] in better.symbol_versions
            and v.partition("_")[2] not in better.symbol_versions[v.partition("_")[0]]
        )
        out.append(
            f"symbol versions {', '.join(beyond) or '(of external libraries)'} are newer "
            f"than {better.name} allows: {symbol_policy.name} at best"
        )
    if black_policy < top:
        bad = sorted(
            {
                f"{lib}: {s}"
                for r in refs.values()
                for lib, syms in r.blacklist.items()
                for s in syms
            }
        )
        out.append("uses blacklisted symbols " + "; ".join(bad[:8]))
    if machine < top:
        out.append(f"needs instruction-set extensions beyond {data.arch}")
    if ucs < top:
        out.append("built for a narrow-unicode (UCS2) Python")
    if pyfpe < top:
        out.append("references PyFPE_jbuf")
    return out
