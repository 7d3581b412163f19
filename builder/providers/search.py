"""Where probes look and how they read what they find: env vars, PATH, library directories,
header macros, ``*.dist-info`` of the target Python, ELF SONAMEs and one-line tool versions.

Everything here is read-only and fast: a directory listing, a small file, a short program run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from builder.core import proc
from builder.core.errors import StackError
from builder.providers.probe import Candidate, Places, ProbeContext

TOOL_TIMEOUT = 20.0
_DEFAULT_LIB_DIRS = (
    "/usr/local/lib",
    "/usr/local/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)


# -- candidates ---------------------------------------------------------------------------------


def env_dirs(ctx: ProbeContext, names: Sequence[str], sub: str = "") -> Iterator[Candidate]:
    """One candidate per env var that is set (existing or not: the reader says which)."""
    for name in names:
        value = ctx.getenv(name)
        if value:
            path = Path(value) / sub if sub else Path(value)
            yield Candidate(path=path, origin=f"${name}/{sub}" if sub else name)


def place_dirs(ctx: ProbeContext, places: Places) -> Iterator[Candidate]:
    """A vendor's toolkit places, in order: its variables, derived ones, its defaults."""
    yield from env_dirs(ctx, places.env)
    for var, sub in places.derived.items():
        yield from env_dirs(ctx, (var,), sub)
    yield from default_dirs(places.defaults)


def default_dirs(paths: Iterable[str | Path], origin: str = "default path") -> Iterator[Candidate]:
    for path in paths:
        if Path(path).exists():
            yield Candidate(path=Path(path), origin=origin)


def on_path(ctx: ProbeContext, programs: Sequence[str]) -> Iterator[Candidate]:
    for program in programs:
        found = proc.which(program, ctx.env.get("PATH", os.defpath))
        if found:
            yield Candidate(path=Path(found), origin="PATH")


def program_in(directory: Path | None, name: str, origin: str) -> Iterator[Candidate]:
    if directory is not None and (directory / name).is_file():
        yield Candidate(path=directory / name, origin=origin)


# -- running a tool for its version ---------------------------------------------------------------


def tool_output(argv: Sequence[str], ctx: ProbeContext) -> tuple[int, str]:
    """Exit status and combined output of a short query; (-1, reason) when it cannot run."""
    try:
        result = proc.run(list(argv), env=ctx.env, timeout=TOOL_TIMEOUT, check=False)
    except StackError as exc:
        return -1, exc.message
    return result.returncode, result.output


def first_match(pattern: str | re.Pattern[str], text: str) -> str | None:
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.MULTILINE)
    match = compiled.search(text)
    return match.group(1) if match else None


# -- headers --------------------------------------------------------------------------------------

_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.+?)[ \t]*(?://.*|/\*.*)?$", re.MULTILINE
)


def header_macros(path: Path, limit: int = 400_000) -> dict[str, str]:
    """``#define NAME VALUE`` lines of a header (the first ``limit`` bytes), values unquoted."""
    with path.open("rb") as f:
        text = f.read(limit).decode("utf-8", errors="replace")
    return {m.group(1): m.group(2).strip().strip('"') for m in _DEFINE.finditer(text)}


def macro_version(path: Path, names: Sequence[str]) -> str | None:
    """``MAJOR.MINOR[.PATCH]`` from integer macros such as NCCL_MAJOR/NCCL_MINOR/NCCL_PATCH."""
    return macros_version(header_macros(path), names)


def macros_version(macros: Mapping[str, str], names: Sequence[str]) -> str | None:
    """:func:`macro_version` over macros already read with :func:`header_macros`."""
    parts = [macros.get(n) for n in names]
    if parts[0] is None or parts[1] is None:
        return None
    digits = [p for p in parts if p is not None]
    if not all(re.fullmatch(r"\d+", p) for p in digits):
        return None
    return ".".join(str(int(p)) for p in digits)


def encoded_version(value: str | None, *, major: int = 1000, minor: int = 10) -> str | None:
    """``13000`` -> ``13.0`` for CUDA-style ``MAJOR*1000 + MINOR*10`` integers."""
    if value is None or not re.fullmatch(r"\d+", value.strip()):
        return None
    number = int(value)
    return f"{number // major}.{(number % major) // minor}"


# -- libraries ------------------------------------------------------------------------------------


def ld_conf_dirs(conf: Path = Path("/etc/ld.so.conf"), depth: int = 0) -> list[Path]:
    """Directories named in ld.so.conf and the files it includes."""
    out: list[Path] = []
    try:
        lines = conf.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and depth < 4:
            pattern = line.split(None, 1)[1] if " " in line else ""
            if pattern and not pattern.startswith("/"):
                pattern = str(conf.parent / pattern)
            for included in sorted(_glob(pattern)):
                out.extend(ld_conf_dirs(included, depth + 1))
        elif line.startswith("/"):
            out.append(Path(line))
    return out


def _glob(pattern: str) -> list[Path]:
    """An absolute glob such as /etc/ld.so.conf.d/*.conf."""
    path = Path(pattern)
    return list(Path(path.anchor).glob(str(path.relative_to(path.anchor)))) if path.anchor else []


def system_lib_dirs(ctx: ProbeContext) -> list[Path]:
    """The dynamic loader's search order, roughly: LD_LIBRARY_PATH, ld.so.conf, the defaults."""
    dirs: list[Path] = []
    for entry in (ctx.getenv("LD_LIBRARY_PATH") or "").split(os.pathsep):
        if entry:
            dirs.append(Path(entry))
    dirs.extend(ld_conf_dirs())
    dirs.extend(Path(d) for d in _DEFAULT_LIB_DIRS)
    return unique_dirs(dirs)


def unique_dirs(dirs: Iterable[Path]) -> list[Path]:
    seen: set[Path] = set()
    out: list[Path] = []
    for d in dirs:
        try:
            key = d.resolve()
        except OSError:
            continue
        if key not in seen and d.is_dir():
            seen.add(key)
            out.append(d)
    return out


def library_files(directory: Path, stem: str) -> tuple[Path | None, list[Path]]:
    """``lib<stem>.so`` (the link name, when present) and every ``lib<stem>.so.*`` beside it."""
    link = directory / f"lib{stem}.so"
    versioned = sorted(directory.glob(f"lib{stem}.so.*"), key=lambda p: (len(p.name), p.name))
    return (link if link.exists() else None), [p for p in versioned if p.exists()]


def soname(path: Path) -> str | None:
    """DT_SONAME of an ELF shared library, read in-process (None when absent or not ELF)."""
    from wheels.elf import ElfError, dynamic

    try:
        return dynamic(path).soname
    except (ElfError, OSError):
        return None


def file_name_version(path: Path, stem: str) -> str | None:
    """``libfoo.so.4.3.0`` -> ``4.3.0`` (after following links); None for ``libfoo.so.4``."""
    try:
        name = path.resolve().name
    except OSError:
        return None
    match = re.fullmatch(rf"lib{re.escape(stem)}\.so\.(\d+\.\d+(?:\.\d+)*)", name)
    return match.group(1) if match else None


# -- Python distributions -------------------------------------------------------------------------


def normalize(name: str) -> str:
    """PEP 503 normal form: ``NVIDIA_nccl.cu13`` -> ``nvidia-nccl-cu13``."""
    return str(canonicalize_name(name))


def index_distributions(site_dirs: Iterable[Path]) -> dict[str, tuple[Path, ...]]:
    """normalized name -> its ``*.dist-info`` directories, in import-path order."""
    found: dict[str, list[Path]] = {}
    for site in site_dirs:
        try:
            entries = list(os.scandir(site))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".dist-info") and entry.is_dir():
                name = entry.name[: -len(".dist-info")].rsplit("-", 1)[0]
                found.setdefault(normalize(name), []).append(Path(entry.path))
    return {k: tuple(v) for k, v in found.items()}


def metadata_version(dist_info: Path) -> str | None:
    """``Version:`` from a dist-info's METADATA (its headers only)."""
    try:
        with (dist_info / "METADATA").open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def distributions(ctx: ProbeContext, names: Iterable[str]) -> Iterator[Path]:
    """dist-info directories of any of ``names`` in the target Python, import-path order."""
    for name in names:
        yield from ctx.python.dists.get(normalize(name), ())


def record_files(dist_info: Path) -> list[str]:
    """Paths listed in a dist-info's RECORD, relative to its site directory."""
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line.split(",", 1)[0] for line in text.splitlines() if line.strip()]


def site_globs(ctx: ProbeContext, pattern: str) -> Iterator[Path]:
    """``pattern`` (relative) matched in every site directory of the target Python."""
    for site in ctx.python.site_dirs:
        yield from sorted(site.glob(pattern))
