"""Device-less import smoke: install a wheel into a fresh venv and load every ELF it carries.

Each extension module is imported as Python imports it, by its dotted name (its packages'
``__init__`` run first, each module loaded once), with immediate binding: RTLD_NOW for the
module and LD_BIND_NOW=1 for everything it pulls in, so an unresolved symbol fails here and not
at the first call. The wheel is installed even where the target interpreter has the same version
already. Its requirements are not, so:

- when a package's ``__init__`` fails before the module's file is opened (a requirement not
  installed, or a module of the wheel that stopped at one), the module is loaded straight from
  its file instead;
- when the module's own initialisation stops at such a requirement (mypyc's modules import their
  runtime library, numba's import numpy), its file is still loaded with every symbol bound: it
  is verified, and the requirement named. So is a loaded module whose initialisation fails in
  another way while some requirement is missing, with the missing requirements named (black's
  modules, after one of them stopped at pytokens). With every requirement installed, that is a
  failure.

Every other shared library in the wheel is dlopened the same way. The probe runs from a
temporary directory, outside any source tree.

Libraries a wheel needs from outside are probed on the host first. When one the vendor expects
from the machine or another distribution (libcuda.so.1, libcudart.so.13 ...) is absent, the files
needing it cannot be loaded here: they are reported as not verified, with the libraries this
host could not supply, instead of passing silently.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from builder.checks import sanitized, venv
from builder.core import proc
from builder.core.errors import EXIT_AUDIT, CommandFailed, UsageError
from wheels.assemble import preload_of, read_dynamic

_RUNNER = r"""
import ctypes, importlib.machinery, importlib.util, json, os, sys
sys.setdlopenflags(os.RTLD_NOW)
spec = json.loads(sys.argv[1])
out = {"preloads": {}, "probe": {}, "found": {}, "extensions": {}, "libraries": {}, "stopped": {}}

class LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]

def where(lib):
    try:  # dlinfo(RTLD_DI_LINKMAP): the path the loader opened
        entry = ctypes.POINTER(LinkMap)()
        if ctypes.CDLL(None).dlinfo(ctypes.c_void_p(lib._handle), 2, ctypes.byref(entry)) == 0:
            return entry.contents.l_name.decode()
    except (AttributeError, OSError, ValueError):
        pass
    return None

def attempt(kind, key, load):
    try:
        loaded = load()
        out[kind][key] = None
        return loaded
    except BaseException as exc:
        out[kind][key] = f"{type(exc).__name__}: {exc}"
        return None

def loaded(path):  # in this process, its symbols bound (RTLD_NOLOAD opens nothing new)
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_NOLOAD)
        return True
    except OSError:
        return False

def load_file(name, path):
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    module_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    loader.exec_module(importlib.util.module_from_spec(module_spec))

def load_extension(name, path):
    # As Python imports it: by name, its packages' __init__ first, once per process (numpy's
    # modules refuse a second load; grpc's cygrpc needs grpc imported). Only when a package
    # needs a requirement that is not installed here is the file loaded by itself.
    # When its package's __init__ failed before the file was opened (a requirement not
    # installed, or a module of the wheel that stopped at one: "module 'black.comments' is not
    # in sys.modules"), the file is loaded by itself; a module missing from the wheel fails.
    if name in sys.modules:
        return
    try:
        importlib.import_module(name)
    except ImportError as exc:
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else ""
        if missing is None or missing.partition(".")[0] in spec["tops"] or loaded(path):
            raise
        load_file(name, path)

for package, code in spec["preloads"]:
    attempt("preloads", package, lambda: exec(compile(code, package, "exec"), {}))
for soname in spec["probe"]:
    lib = attempt("probe", soname, lambda: ctypes.CDLL(soname, mode=os.RTLD_NOW))
    if lib is not None:
        out["found"][soname] = where(lib)

absent = spec["absent"]  # the requirements this interpreter lacks, as modules

def stopped_at(error):
    # The module outside the wheel whose absence stopped an import: a ModuleNotFoundError in
    # the chain, or a requirement not installed here that the message names (numpy's C API:
    # "numpy._core.multiarray failed to import").
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ModuleNotFoundError) and error.name:
            top = error.name.partition(".")[0]
            return None if top in spec["tops"] else top
        words = set(str(error).replace(".", " ").replace("'", " ").split())
        named = [m for m in absent if m in words]
        if named:
            return named[0]
        error = error.__cause__ or error.__context__
    return None

for name, path in spec["extensions"]:
    try:
        load_extension(name, path)
        out["extensions"][path] = None
    except BaseException as exc:
        out["extensions"][path] = f"{type(exc).__name__}: {exc}"
        if loaded(path):
            out["stopped"][path] = stopped_at(exc) or (", ".join(absent) if absent else None)
for path in spec["libraries"]:
    attempt("libraries", path, lambda: ctypes.CDLL(path, mode=os.RTLD_NOW))
print("@@SMOKE@@" + json.dumps(out))
"""

_UNDEFINED = re.compile(r"(?:(\S+): )?undefined symbol: (\S+)")
_CANNOT_OPEN = re.compile(r"(\S+): cannot open shared object file")


@dataclass(frozen=True)
class Failure:
    file: str  # path inside the wheel
    kind: str  # "symbol", "library" or "error"
    detail: str  # the symbol, the library, or the message

    def render(self) -> str:
        if self.kind == "symbol":
            return f"{self.file}: unresolved symbol {self.detail}"
        if self.kind == "library":
            return f"{self.file}: needs {self.detail}, which neither the wheel nor this host has"
        return f"{self.file}: {self.detail}"


@dataclass
class SmokeResult:
    wheel: str
    vendor: str | None
    verified: list[str] = field(default_factory=list)  # files loaded with every symbol bound
    failures: list[Failure] = field(default_factory=list)
    # Vendor runtime libraries this host lacks -> the files that need them (not verified here).
    unsupplied: dict[str, list[str]] = field(default_factory=dict)
    # Vendor runtime libraries this host supplied instead (a toolkit's copy) -> where from.
    host_supplied: dict[str, str] = field(default_factory=dict)
    # Packages whose preload (import torch, ...) could not run here -> why.
    preload_errors: dict[str, str] = field(default_factory=dict)
    # Extensions loaded with every symbol bound whose initialisation stopped at a requirement
    # that is not installed -> that requirement's module.
    requirement_absent: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def why(self, lib: str) -> str:
        """Why this host could not supply ``lib``: which distribution the target interpreter
        lacks, or which part of the vendor's runtime the machine lacks."""
        if self.vendor is None:
            return "which this host cannot supply"
        from wheels.policy import load_vendor_policy

        supplier = load_vendor_policy(self.vendor).supplier(lib)
        if supplier is not None:
            return (
                f"which {supplier.distribution} supplies, and the target interpreter has no "
                f"{supplier.distribution} installed (pip install {supplier.distribution})"
            )
        return f"which the {self.vendor} driver or runtime supplies, and this host lacks"

    def _stopped(self, file: str) -> str:
        module = self.requirement_absent.get(file)
        if module is None:
            return ""
        return (
            f" (loaded; its initialisation stops short without {module}, not installed here: "
            "the wheel's requirements are not)"
        )

    @property
    def complete(self) -> bool:
        return self.ok and not self.unsupplied and not self.preload_errors

    def to_json(self) -> dict[str, Any]:
        return {
            "wheel": self.wheel,
            "vendor": self.vendor,
            "ok": self.ok,
            "complete": self.complete,
            "verified": self.verified,
            "failures": [vars(f) for f in self.failures],
            "unsupplied": self.unsupplied,
            "host_supplied": self.host_supplied,
            "preload_errors": self.preload_errors,
            "requirement_absent": self.requirement_absent,
        }

    def render(self) -> str:
        lines = [f"smoke {self.wheel}:"]
        lines += [f"  ok       {f}{self._stopped(f)}" for f in self.verified]
        lines += [f"  FAILED   {f.render()}" for f in self.failures]
        lines += [
            f"  host     {lib} <- {path} (the vendor's, taken from this host)"
            for lib, path in self.host_supplied.items()
        ]
        lines += [
            f"  NOT VERIFIED  {package}/__init__.py: its preload did not run here: {error}"
            for package, error in self.preload_errors.items()
        ]
        for lib, files in self.unsupplied.items():
            lines.append(f"  NOT VERIFIED  {', '.join(files)}: needs {lib}, {self.why(lib)}")
        if self.failures:
            lines.append(f"smoke failed: {len(self.failures)} problem(s)")
        elif self.unsupplied:
            lines.append(
                "smoke passed for what this host can load; not verified here: "
                + ", ".join(sorted({f for v in self.unsupplied.values() for f in v}))
                + f" (missing on this host: {', '.join(self.unsupplied)})"
            )
        else:
            lines.append(
                f"smoke passed: {len(self.verified)} file(s) loaded with every symbol bound"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class _Elf:
    arcname: str
    module: str | None  # the dotted module name when this is an extension module
    names: tuple[str, ...]  # file name and SONAME: what a DT_NEEDED entry may call it
    needed: tuple[str, ...]


def smoke(
    wheel: Path,
    vendor: str | None = None,
    *,
    python: str | None = None,
    sanitize: str | None = None,
) -> SmokeResult:
    """Install ``wheel`` into a fresh venv (no dependencies) and load every ELF in it; a
    sanitized wheel (``sanitize``, else its local version) with its sanitizer's runtime."""
    if not wheel.is_file():
        raise UsageError(f"no such wheel: {wheel}")
    if vendor is None:
        from wheels.naming import vendor_of_local

        vendor = vendor_of_local(wheel.name.partition("-")[2].partition("-")[0])  # the version
    with tempfile.TemporaryDirectory(prefix="infini-smoke-") as tmp:
        work = Path(tmp)
        # The venv sees what an install into the target interpreter would (torch, nvidia-*).
        interpreter = str(
            venv.install(wheel, venv.make(work / "venv", python or sys.executable), work)
        )
        site = Path(
            proc.capture(
                [interpreter, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                cwd=work,
            ).strip()
        )
        elves = _elves(wheel, site)
        env = sanitized.python_env(sanitized.wheel_profile(wheel, sanitize), vendor)
        report = _run(interpreter, work, site, elves, absent_requirements(wheel, interpreter), env)
    return _classify(wheel.name, vendor, elves, report)


def _elves(wheel: Path, site: Path) -> list[_Elf]:
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if not n.endswith("/"))
    out: list[_Elf] = []
    for arcname in names:
        path = site / arcname
        info = read_dynamic(path) if path.is_file() else None
        if info is None:
            continue
        out.append(
            _Elf(
                arcname=arcname,
                module=_module_name(arcname),
                names=tuple(dict.fromkeys(n for n in (path.name, info.soname) if n)),
                needed=info.needed,
            )
        )
    return out


def _module_name(arcname: str) -> str | None:
    """``pkg/_ext.cpython-311-x86_64-linux-gnu.so`` -> ``pkg._ext``; None for a library.

    A plain ``.so`` is taken for a module only when its name is not a library's (``lib*``).
    """
    name = Path(arcname).name
    for suffix in sorted(EXTENSION_SUFFIXES, key=len, reverse=True):
        if not name.endswith(suffix) or (suffix == ".so" and name.startswith("lib")):
            continue
        dotted = arcname[: -len(suffix)].replace("/", ".")
        dotted = dotted.removesuffix(".__init__")  # a package whose __init__ is compiled (mypyc)
        return dotted if all(p.isidentifier() for p in dotted.split(".")) else None
    return None


def preloads(site: Path, elves: list[_Elf]) -> list[list[str]]:
    """[package, code] of each installed package whose ``__init__.py`` carries a preload block
    (wheels.assemble writes one where a library needs what only an import loads)."""
    packages = {Path(e.arcname).parent for e in elves}
    out = []
    for package in sorted({p for pkg in packages for p in (pkg, *pkg.parents) if str(p) != "."}):
        init = site / package / "__init__.py"
        code = preload_of(init.read_text(encoding="utf-8")) if init.is_file() else None
        if code is not None:
            out.append([package.as_posix(), code])
    return out


def absent_requirements(wheel: Path, python: str) -> list[str]:
    """The wheel's requirements that ``python`` has not installed (markers evaluated for it, so
    an extra's never count), as the top-level modules they are likely imported as: each
    distribution's name, normalised (``librt``, ``pytokens``, ``typing_extensions``)."""
    from packaging.requirements import Requirement

    from builder.checks.requirements import requires_dist, unmet
    from wheels.naming import escaped_name

    found = unmet(requires_dist(wheel), python)
    lacking = [Requirement(u.requirement) for u in found if u.found is None]
    return sorted({escaped_name(r.name) for r in lacking})


def _run(
    interpreter: str,
    work: Path,
    site: Path,
    elves: list[_Elf],
    absent: list[str],
    base: dict[str, str],
) -> dict[str, Any]:
    inside = {n for e in elves for n in e.names}
    spec = {
        # What the packages run before their libraries load (torch's, flash-attn's extension).
        "preloads": preloads(site, elves),
        "probe": sorted({n for e in elves for n in e.needed} - inside),
        "extensions": [[e.module, str(site / e.arcname)] for e in elves if e.module],
        "tops": sorted({e.module.partition(".")[0] for e in elves if e.module}),
        "absent": absent,
        "libraries": [str(site / e.arcname) for e in elves if not e.module],
    }
    runner = work / "smoke_runner.py"
    runner.write_text(_RUNNER, encoding="utf-8")
    env = {k: v for k, v in base.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"LD_BIND_NOW": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    result = proc.run(
        [interpreter, "-I", str(runner), json.dumps(spec)],
        cwd=work,
        env=env,
        check=False,
        timeout=600,
    )
    marker = next(
        (line for line in result.output.splitlines() if line.startswith("@@SMOKE@@")), None
    )
    if marker is None:
        tail = "\n".join(result.output.splitlines()[-20:])
        raise CommandFailed(
            "the import smoke probe",
            result.argv,
            result.returncode,
            tail,
            None,
            exit_code=EXIT_AUDIT,
        )
    data: dict[str, Any] = json.loads(marker.removeprefix("@@SMOKE@@"))
    data["site"] = str(site)
    return data


def _classify(
    wheel: str, vendor: str | None, elves: list[_Elf], report: dict[str, Any]
) -> SmokeResult:
    result = SmokeResult(wheel=wheel, vendor=vendor)
    result.preload_errors = {pkg: err for pkg, err in report["preloads"].items() if err}
    expected = _vendor_expects(vendor)
    missing = {lib for lib, error in report["probe"].items() if error is not None}
    result.host_supplied = {
        lib: path or "?" for lib, path in sorted(report["found"].items()) if expected(lib)
    }
    by_path = {str(Path(report["site"]) / e.arcname): e for e in elves}
    for e in elves:
        for lib in e.needed:
            if lib in missing and not expected(lib):
                result.failures.append(Failure(e.arcname, "library", lib))
    for kind in ("extensions", "libraries"):
        for path, error in report[kind].items():
            elf = by_path[path]
            stopped = report["stopped"].get(path)
            if error is None or stopped is not None:
                result.verified.append(elf.arcname)
                if stopped is not None:
                    result.requirement_absent[elf.arcname] = stopped
                continue
            absent = [lib for lib in _closure_needs(elf, elves) if lib in missing]
            vendor_absent = [lib for lib in absent if expected(lib)]
            if vendor_absent and len(vendor_absent) == len(absent):
                for lib in vendor_absent:
                    result.unsupplied.setdefault(lib, []).append(elf.arcname)
            elif not absent:
                result.failures.append(_failure(elf.arcname, error))
    return result


def _closure_needs(elf: _Elf, elves: list[_Elf]) -> list[str]:
    """DT_NEEDED of ``elf`` and, transitively, of the wheel's files it needs."""
    by_name = {n: e for e in elves for n in e.names}
    seen: list[str] = []
    todo = list(elf.needed)
    while todo:
        lib = todo.pop(0)
        if lib in seen:
            continue
        seen.append(lib)
        if lib in by_name:
            todo.extend(by_name[lib].needed)
    return seen


def _failure(arcname: str, error: str) -> Failure:
    if match := _UNDEFINED.search(error):
        where = match.group(1)
        detail = match.group(2)
        if where and not where.endswith(Path(arcname).name):
            detail += f" (in {Path(where).name})"
        return Failure(arcname, "symbol", detail)
    if match := _CANNOT_OPEN.search(error):
        return Failure(arcname, "library", Path(match.group(1)).name)
    return Failure(arcname, "error", error.strip().splitlines()[-1] if error.strip() else error)


def _vendor_expects(vendor: str | None) -> Any:
    """A predicate: does the vendor expect this library from the machine or a distribution?"""
    if vendor is None:
        return lambda soname: False
    from wheels.policy import load_vendor_policy

    policy = load_vendor_policy(vendor)
    return policy.outside_wheel
