"""Which C++ runtime the configured compilers link into shared libraries.

A compiler whose library directory holds only ``libstdc++.a`` (or one that passes
``-static-libstdc++``) gives every shared object of the stack a private copy of the C++
runtime. For a stack whose libraries pass C++ objects to each other, and to torch, that splits
the runtime: locales, exceptions and RTTI of one copy meet code of another, and the product
crashes (a locale facet of the wrong kind inside ``std::ostringstream``) or loses exceptions
(``SystemError: ... returned NULL without setting an exception``). Nothing at configure or link
time notices, so preflight links a tiny shared C++ library with the configured compilers (CXX,
and nvcc with its host compiler for CUDA) and reads what it needs and defines, in-process.
The finding is kept with the other host facts, keyed by the compiler file's stat and the flags.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from builder.core import proc
from builder.core.host import ProgramMemo
from builder.providers import search
from builder.providers.probe import (
    BUILD,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    unusable,
)
from wheels.cxxruntime import UNWINDERS, classify, describe
from wheels.elf import ElfError, read_elf_file

# Formats an unsigned long through a locale (what crashed InfiniLM) and throws across the call.
PROBE_SOURCE = """\
#include <sstream>
#include <stdexcept>
#include <string>
std::string infini_stack_probe_format(unsigned long value) {
  std::ostringstream out;
  out << value;
  return out.str();
}
void infini_stack_probe_throw() { throw std::runtime_error("probe"); }
"""
Read = Callable[[ProbeContext, Candidate, Deps], Reading]
WANTED = "libstdc++.so.6 (the stack's libraries exchange C++ types)"
HINT = (
    "use a compiler that links the shared libstdc++.so.6 (e.g. the system g++: "
    "CXX=/usr/bin/g++ CC=/usr/bin/gcc CUDAHOSTCXX=/usr/bin/g++), or drop -static-libstdc++ "
    "and -static-libgcc from the flags"
)


def _wanted(ctx: ProbeContext) -> str:
    return WANTED if ctx.shared_cxx_runtime else "any"


# --- the probe ----------------------------------------------------------------------------------


def flags(ctx: ProbeContext, *names: str) -> list[str]:
    """The environment's compiler and linker flags, as CMake takes them in for a first
    configure (CXXFLAGS, LDFLAGS...)."""
    return [f for name in names for f in shlex.split(ctx.env.get(name, ""))]


def link(argv: Sequence[str], source_name: str, ctx: ProbeContext) -> Reading:
    """Compile and link PROBE_SOURCE into a shared library with ``argv`` (``-o`` appended),
    and read what runtime it uses."""
    with tempfile.TemporaryDirectory(prefix="infini-cxx-probe-") as tmp:
        source = Path(tmp) / source_name
        source.write_text(PROBE_SOURCE, encoding="utf-8")
        out = Path(tmp) / "libinfini_stack_probe.so"
        code, text = search.tool_output([*argv, str(source), "-o", str(out)], ctx)
        if code != 0 or not out.is_file():
            tail = " | ".join(text.strip().splitlines()[-3:])
            return unusable(f"cannot link a shared C++ library with {argv[0]}: {tail}")
        try:
            info = read_elf_file(out)
        except (ElfError, OSError) as exc:
            return unusable(f"cannot read the probe library: {exc}")
    found = classify(info)
    problems = [describe(found)] if found.private else []
    if not set(info.needed) & UNWINDERS:  # the probe throws: it needs an unwinder
        problems.append("throws but needs no libgcc_s.so.1: a private copy of libgcc's unwinder")
    shared = not problems
    return Reading(
        version="shared" if shared else "private",
        source=f"a shared library linked with {Path(argv[0]).name}",
        satisfied=shared or not ctx.shared_cxx_runtime,
        problem=None
        if shared
        else f"{Path(argv[0]).name} links a library that " + "; it ".join(problems),
        notes=(f"the probe library needs: {', '.join(info.needed) or 'nothing'}",),
    )


def remembered(
    ctx: ProbeContext, program: str, argv: Sequence[str], probe: Callable[[], Reading]
) -> Reading:
    """The probe's reading, from the cache when ``program`` (its file) and ``argv`` are as
    they were when it last ran."""
    memo = None
    if ctx.cache is not None:
        memo = ProgramMemo(ctx.cache / "cxx-runtime.json", program, shlex.join(argv))
        if isinstance(hit := memo.get(), dict):
            return _reading(hit, ctx)
    reading = probe()
    if memo is not None and reading.usable:
        memo.put(
            {
                "shared": reading.version == "shared",
                "problem": reading.problem,
                "source": reading.source,
                "notes": list(reading.notes),
            }
        )
    return reading


def _reading(data: dict[str, object], ctx: ProbeContext) -> Reading:
    shared = bool(data.get("shared"))
    notes = data.get("notes")
    return Reading(
        version="shared" if shared else "private",
        source=str(data.get("source", "")),
        satisfied=shared or not ctx.shared_cxx_runtime,
        problem=None if shared else str(data.get("problem")),
        notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
    )


# --- CXX ------------------------------------------------------------------------------------------


def _found(provider: str) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    """The one candidate: the program another provider found (the compiler, nvcc)."""

    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        found = deps.get(provider)
        if found is not None and found.ok and found.path:
            yield Candidate(path=Path(found.path), origin=provider)

    return candidates


def _provider(name: str, what: str, compiler: str, read: Read) -> Provider:
    return Provider(
        name=name,
        what=what,
        needed_for=BUILD,
        after=(compiler,),
        requires=(compiler,),
        candidates=_found(compiler),
        read=read,
        hint=HINT,
        wanted=_wanted,
    )


def _read_cxx(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    argv = [
        str(candidate.path),
        *flags(ctx, "CXXFLAGS"),
        "-shared",
        "-fPIC",
        *flags(ctx, "LDFLAGS"),
    ]
    return remembered(ctx, str(candidate.path), argv, lambda: link(argv, "probe.cpp", ctx))


CXX_RUNTIME = _provider(
    "cxx-runtime", "the C++ runtime CXX links into shared libraries", "cxx", _read_cxx
)


# --- the CUDA host compiler -----------------------------------------------------------------------


def _read_cuda(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    host = ctx.getenv("CUDAHOSTCXX")
    # CMake passes -ccbin only for CUDAHOSTCXX; without it nvcc takes the g++ on PATH.
    program = host or proc.which("g++", ctx.env.get("PATH"))
    if program is None:
        return unusable("no host compiler: CUDAHOSTCXX is unset and there is no g++ on PATH")
    argv = [
        str(candidate.path),
        *(["-ccbin", host] if host else []),
        *flags(ctx, "CUDAFLAGS"),
        "-shared",
        "-Xcompiler",
        "-fPIC",
        *flags(ctx, "LDFLAGS"),
    ]
    return remembered(ctx, program, argv, lambda: link(argv, "probe.cu", ctx))


CUDA_HOST_RUNTIME = _provider(
    "cuda-host-runtime",
    "the C++ runtime nvcc's host compiler (CUDAHOSTCXX) links into shared libraries",
    "cuda",  # its path is nvcc's
    _read_cuda,
)
