"""Moore Threads providers: the MUSA toolkit (mcc), musart, muBLAS, muDNN, MCCL, torch_musa, and
mthreads-gmi at run time.

Upstream (InfiniOps, InfiniCCL) takes the first of MUSA_ROOT, MUSA_HOME, MUSA_PATH that is set,
else /usr/local/musa, and needs ``$MUSA_ROOT/bin/mcc``; libraries come from ``$MUSA_ROOT/lib``.
Version sources (from MUSA toolkits seen in the wild; inferred, not from MUSA documentation):
``mcc --version`` prints ``mcc version 5.2.0`` after clang's own line, and
``bin/musa_toolkits_version`` prints ``musa_toolkits:{"version": "4.3.0", ...}`` (older) or
``musa_toolkits version: 5.2.0`` (newer). Library versions come from their file names
(``libmusart.so.4.3.0``) or, for MCCL, from mccl.h's MCCL_MAJOR/MINOR/PATCH when present.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from builder.providers import search
from builder.providers.cuda import TORCH, device_tool
from builder.providers.libs import (
    LibrarySpec,
    dist_candidates,
    library_reader,
    macro_reader,
    prefix_candidate,
    read_dist,
    system_candidate,
    toolkit_root,
)
from builder.providers.probe import (
    BOTH,
    BUILD,
    Candidate,
    Deps,
    ProbeContext,
    Provider,
    Reading,
    Rule,
    unusable,
)

MOORE_RULE = Rule(toolkit=True, options=("WITH_MOORE",))


def mcc_version(text: str) -> str | None:
    """``mcc version 5.2.0`` (not clang's own ``clang version 14.0.0`` line above it)."""
    return search.first_match(r"^\s*mcc version (\d+\.\d+(?:\.\d+)?)", text)


def toolkits_version(text: str) -> str | None:
    """``musa_toolkits:{"version":"4.3.0",...}`` or ``musa_toolkits version: 5.2.0``."""
    plain = search.first_match(r"musa_toolkits version:\s*(\d+\.\d+(?:\.\d+)?)", text)
    if plain:
        return plain
    blob = text.strip()
    if blob.startswith("musa_toolkits:"):
        try:
            data = json.loads(blob.split(":", 1)[1])
        except ValueError:
            return None
        value = data.get("version") if isinstance(data, dict) else None
        return str(value) if value else None
    return None


def _musa_candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
    yield from search.place_dirs(ctx, ctx.places)
    for mcc in search.on_path(ctx, ("mcc",)):
        yield Candidate(path=mcc.path.resolve().parent.parent, origin="PATH")


def _read_musa(ctx: ProbeContext, candidate: Candidate, deps: Deps) -> Reading:
    root = candidate.path
    mcc = root / "bin" / "mcc"
    if not root.exists():
        return unusable("does not exist")
    if not mcc.is_file():
        return unusable("has no bin/mcc")
    code, out = search.tool_output([str(mcc), "--version"], ctx)
    version = mcc_version(out) if code == 0 else None
    source = "mcc --version"
    if version is None:
        helper = root / "bin" / "musa_toolkits_version"
        if helper.is_file():
            code, out = search.tool_output([str(helper)], ctx)
            version = toolkits_version(out) if code == 0 else None
            source = "musa_toolkits_version"
    notes = (
        ()
        if (root / "lib" / "libmusa.so").exists() or any((root / "lib").glob("libmusa.so.*"))
        else ("no lib/libmusa.so (InfiniOps links it)",)
    )
    return Reading(
        version=version,
        source=source,
        path=mcc,
        notes=notes,
        defines={"MUSA_ROOT": str(root)},
        problem=None if version else f"no MUSA version in `{source}`: {out.strip()[-160:]!r}",
    )


MUSA = Provider(
    name="musa",
    what="MUSA toolkit (mcc)",
    needed_for=BUILD,
    rules=(MOORE_RULE,),
    candidates=_musa_candidates,
    read=_read_musa,
    hint="install the MUSA toolkit (musa_toolkits) at /usr/local/musa, or set MUSA_ROOT to it",
)


def _musa_library(spec: LibrarySpec) -> Callable[[ProbeContext, Deps], Iterator[Candidate]]:
    def candidates(ctx: ProbeContext, deps: Deps) -> Iterator[Candidate]:
        root = toolkit_root(deps, "musa")
        if root is not None:
            yield prefix_candidate(root, "musa toolkit")
        yield system_candidate(ctx)

    return candidates


def _library(
    name: str,
    spec: LibrarySpec,
    what: str,
    hint: str,
    rules: tuple[Rule, ...],
    *,
    optional: bool = False,
) -> Provider:
    # Upstream looks for them in $MUSA_ROOT/lib only: without the toolkit there is nothing to do.
    return Provider(
        name=name,
        what=what,
        needed_for=BOTH,
        rules=rules,
        requires=("musa",),
        candidates=_musa_library(spec),
        read=library_reader(spec),
        hint=hint,
        optional=optional,
    )


MUSART = _library(
    "musart",
    LibrarySpec(stem="musart", header="musa_runtime.h", link_define="MUSART_LIB"),
    "MUSA runtime (libmusart)",
    "part of the MUSA toolkit: reinstall musa_toolkits ($MUSA_ROOT/lib/libmusart.so)",
    (MOORE_RULE,),
)
MUBLAS = _library(
    "mublas",
    LibrarySpec(stem="mublas", header="mublas.h", link_define="MUBLAS_LIB"),
    "muBLAS (InfiniOps)",
    "install muBLAS into $MUSA_ROOT (part of musa_toolkits)",
    (Rule(names=frozenset({"infiniops", "infiniccl"}), options=("WITH_MOORE",)),),
)
# Listed upstream as a Moore library, but InfiniOps 1f6f9c2 links no muDNN: a note, not a failure.
MUDNN = _library(
    "mudnn",
    LibrarySpec(stem="mudnn", header="mudnn.h"),
    "muDNN (not linked by the pinned InfiniOps)",
    "install muDNN (the mudnn package) into $MUSA_ROOT",
    (Rule(names=frozenset({"infiniops"}), options=("WITH_MOORE",)),),
    optional=True,
)
MCCL = _library(
    "mccl",
    LibrarySpec(
        stem="mccl",
        header="mccl.h",
        link_define="MCCL_LIB",
        include_define="MCCL_INC",
        version=macro_reader("mccl.h", ("MCCL_MAJOR", "MCCL_MINOR", "MCCL_PATCH")),
    ),
    "MCCL (InfiniCCL's MCCL backend)",
    "install MCCL (the mccl package) into $MUSA_ROOT",
    (Rule(names=frozenset({"infiniccl"}), options=("WITH_MCCL",)),),
)

TORCH_MUSA = Provider(
    name="torch_musa",
    what="torch_musa in the target Python (InfiniOps WITH_TORCH)",
    needed_for=BOTH,
    rules=(Rule(names=frozenset({"infiniops"}), options=("WITH_TORCH",)),),
    candidates=dist_candidates(("torch_musa",), "torch_musa"),
    read=read_dist,
    hint=lambda ctx: (
        f"{ctx.python.executable} -m pip install the torch_musa wheel that matches "
        "torch and the MUSA toolkit (from Moore Threads' release page)"
    ),
)

MTHREADS_GMI = device_tool(
    "mthreads-gmi",
    "mthreads-gmi (device detection)",
    "install the Moore Threads driver (it ships mthreads-gmi)",
    ("WITH_MOORE",),
)

MOORE_PROVIDERS: tuple[Provider, ...] = (
    MUSA,
    MUSART,
    MUBLAS,
    MUDNN,
    MCCL,
    TORCH,
    TORCH_MUSA,
    MTHREADS_GMI,
)
__all__ = ["MOORE_PROVIDERS", "mcc_version"]
