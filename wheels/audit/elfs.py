"""The checks of each ELF file, in order: architecture, install place, RUNPATH, resolution,
stranded needs, the imports its packages must run first (:mod:`~wheels.audit.preloads`), a
private C++ runtime that C++ symbols cross (:mod:`~wheels.audit.cxx`), libpython (not needed,
not linked in statically), the extension's ``PyInit_<name>`` and symbol closure; and the
report of each."""

from __future__ import annotations

from wheels.audit.archive import Archive
from wheels.audit.cxx import check_cxx_runtimes
from wheels.audit.findings import Findings
from wheels.audit.ldso import Elves, check_runpaths, elf_kind, resolve_all, uses_python
from wheels.audit.preloads import check_preloads
from wheels.audit.runpaths import judge_leaving_entries
from wheels.audit.scopes import check_stranded, check_symbols, scopes_by_member
from wheels.audit_report import ElfReport, SymbolCheck, plural, shorten
from wheels.elf import ElfInfo
from wheels.policy.python_api import (
    PYTHON_CORE,
    PYTHON_PREFIXES,
    STATIC_PYTHON_MIN,
    is_python_api,
)


def _check_python(ctx: Elves, member: str, info: ElfInfo, f: Findings) -> None:
    defined = sorted(
        {
            s
            for s in info.exported_starting(PYTHON_PREFIXES)
            if is_python_api(s) and not s.startswith("PyInit_")
        }
    )
    core = [s for s in defined if s in PYTHON_CORE]
    if core or len(defined) >= STATIC_PYTHON_MIN:
        named = shorten([*core, *(d for d in defined if d not in core)], 4)
        f.violation(
            "static-libpython",
            member,
            f"defines {plural(len(defined), 'Python C-API symbol')} ({named}): a "
            "statically linked interpreter",
        )
    elif defined:
        f.warning(
            "python-api-symbols",
            member,
            f"exports {shorten(defined, 4)}, named like "
            "the interpreter's own C API: the two can interpose each other",
        )
    module = ctx.extensions.get(member)
    if module and f"PyInit_{module}" not in info.entry_points:
        f.violation(
            "no-pyinit", member, f"extension module {module!r} does not export PyInit_{module}"
        )


def check_elfs(ctx: Elves, archive: Archive, f: Findings) -> list[ElfReport]:
    """Every check of every ELF file of the wheel; the report of each."""
    for member, info in ctx.elfs.items():
        if ctx.arch and info.arch and info.arch != ctx.arch:
            f.violation("arch", member, f"built for {info.arch}, the wheel is tagged {ctx.arch}")
        elif info.arch is None:
            f.warning("arch", member, info.arch_error or "unknown architecture")
        if ctx.install_of.get(member) is None:
            f.warning(
                "outside-site-packages",
                member,
                "installs outside site-packages, so its $ORIGIN-relative RUNPATH cannot be checked",
            )
        if archive.data_dir and member.startswith(f"{archive.data_dir}/purelib/"):
            f.violation("purelib", member, "shared library in the purelib scheme")
        elif archive.root_is_purelib:
            f.warning(
                "purelib",
                member,
                "shared library in a Root-Is-Purelib wheel: it "
                "installs with the pure-Python files, wherever they go",
            )
        check_runpaths(ctx, member, info, f)
    resolve_all(ctx, f)
    judge_leaving_entries(ctx, f)
    in_python = {m for root in ctx.extensions for m in ctx.groups[root].members}
    in_python |= _python_only(ctx, in_python, f)
    scopes = scopes_by_member(ctx)
    check_stranded(ctx, archive, scopes, f)
    check_preloads(ctx, archive, scopes, f)
    cxx = check_cxx_runtimes(ctx, scopes, f)
    reports = []
    for member, info in ctx.elfs.items():
        _check_python(ctx, member, info, f)
        symbols = check_symbols(ctx, member, scopes[member], member in in_python, f)
        reports.append(_report(ctx, member, info, symbols, cxx.get(member)))
    if ctx.musl_unchecked:
        f.warning(
            "musl-unverified",
            None,
            f"musl's C library is not on this host: "
            f"{plural(sum(ctx.musl_unchecked.values()), 'undefined symbol')} of "
            f"{plural(len(ctx.musl_unchecked), 'ELF file')} that only it can define are not "
            "checked (musl has no symbol versions to check them by either)",
        )
    return reports


def _python_only(ctx: Elves, in_python: set[str], f: Findings) -> set[str]:
    """Libraries no extension of the wheel loads that use the Python C API and export no
    ``PyInit_``: only a Python process can load them (ctypes, another package's extension), so
    the interpreter binds their C-API symbols. A warning says so; they are not undefined."""
    found = set()
    for member in own_libraries(ctx):
        info = ctx.elfs[member]
        if member in in_python or not uses_python(info):
            continue
        found.update(ctx.groups[member].members)
        f.warning(
            "python-only-library",
            member,
            "uses the Python C API but is no extension module (no PyInit_) and no extension of "
            "the wheel loads it: it can only be loaded into a Python process (ctypes, or "
            "another package's extension), whose interpreter defines those symbols",
        )
    return found


def own_libraries(ctx: Elves) -> list[str]:
    """Libraries loaded as roots of their own: nothing in the wheel loads them."""
    return [
        m
        for m in sorted(ctx.groups)
        if m not in ctx.extensions and elf_kind(ctx, m, ctx.elfs[m]) == "library"
    ]


def _report(
    ctx: Elves, member: str, info: ElfInfo, symbols: SymbolCheck, cxx: str | None
) -> ElfReport:
    return ElfReport(
        member=member,
        kind=elf_kind(ctx, member, info),
        arch=info.arch,
        soname=info.soname,
        needed=info.needed,
        rpath=info.rpath,
        runpath=info.runpath,
        version_needs={n.file: n.versions for n in info.version_needs},
        version_defs=info.version_defs,
        exports=info.export_count,
        needs=ctx.needs[member],
        symbols=symbols,
        isa=info.isa_ext,
        defined_names=info.export_names,
        undefined_names=tuple(
            f"{n}@{v}" if v else n
            for n, v in zip(info.undefined, info.undefined_versions, strict=True)
        ),
        cxx_runtime=cxx,
    )
