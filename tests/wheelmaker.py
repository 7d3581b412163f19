"""Build small real wheels for the audit tests: C sources compiled with the host's gcc.

``Compiler`` turns C text into shared objects (SONAME, RUNPATH and links as asked);
``make_wheel`` zips files into a wheel with WHEEL, METADATA and a correct RECORD, and lets a test
break exactly one thing (a tampered RECORD, a ``..`` member, a duplicate, a symlink).
``corpus`` builds the whole set of wheels the integration tests share, each named for what it
demonstrates.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
EXT = f".{sys.implementation.cache_tag}-x86_64-linux-gnu.so"
LINUX = f"{TAG}-{TAG}-linux_x86_64"


def have_gcc() -> bool:
    return shutil.which("gcc") is not None


@dataclass
class Compiler:
    """Compiles C sources into ``root`` with gcc; each output is named for its role."""

    root: Path
    count: int = 0

    def shared(
        self,
        name: str,
        source: str,
        *,
        soname: str | None = None,
        links: Sequence[Path] = (),
        runpath: str | None = None,
        flags: Sequence[str] = (),
    ) -> Path:
        """A shared object ``name``; ``links`` are other outputs it is linked against."""
        self.count += 1
        work = self.root / f"obj{self.count}"
        work.mkdir(parents=True, exist_ok=True)
        src = work / "src.c"
        src.write_text(source, encoding="utf-8")
        out = work / name
        argv = ["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src)]
        if soname:
            argv.append(f"-Wl,-soname,{soname}")
        if runpath is not None:
            argv += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        argv += ["-Wl,--no-as-needed", *(str(p) for p in links)]
        argv += list(flags)
        subprocess.run(argv, check=True, capture_output=True, text=True)
        return out


@dataclass(frozen=True)
class Breakage:
    """One thing to get wrong in the archive itself."""

    tamper_record: str | None = None  # a member whose RECORD hash is altered
    dotdot: bool = False
    duplicate: str | None = None  # a member written twice
    symlink: bool = False
    extra_members: Mapping[str, bytes] = field(default_factory=dict)  # not listed in RECORD


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    out_dir: Path,
    files: Mapping[str, bytes | Path],
    *,
    name: str = "demo",
    version: str = "1.0+cpu",
    tag: str = LINUX,
    requires: Sequence[str] = (),
    breakage: Breakage = Breakage(),
    wheel_tags: Sequence[str] = (),
) -> Path:
    """Write ``{name}-{version}-{tag}.whl`` holding ``files`` plus its .dist-info, whose WHEEL
    has a ``Tag`` line for each of ``wheel_tags`` (default: ``tag``)."""
    dist_info = f"{name}-{version}.dist-info"
    contents = {k: (v.read_bytes() if isinstance(v, Path) else v) for k, v in files.items()}
    tag_lines = "".join(f"Tag: {t}\n" for t in wheel_tags or [tag])
    contents[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: wheelmaker\nRoot-Is-Purelib: false\n{tag_lines}"
    ).encode()
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    contents[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    record = [f"{p},{_digest(d)},{len(d)}" for p, d in contents.items()]
    if breakage.tamper_record:
        record = [
            (
                line.replace("sha256=", "sha256=AAAA", 1)
                if line.startswith(breakage.tamper_record + ",")
                else line
            )
            for line in record
        ]
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    target = out_dir / f"{name}-{version}-{tag}.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in contents.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if data[:4] == b"\x7fELF" else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
        _break(zf, contents, breakage)
    return target


def _break(zf: zipfile.ZipFile, contents: Mapping[str, bytes], breakage: Breakage) -> None:
    if breakage.dotdot:
        zf.writestr("../escape.txt", b"outside\n")
    if breakage.duplicate:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # zipfile warns about duplicates
            zf.writestr(breakage.duplicate, contents[breakage.duplicate] + b"\n# again\n")
    if breakage.symlink:
        info = zipfile.ZipInfo("demo/link.so")
        info.create_system = 3
        info.external_attr = 0o120777 << 16
        zf.writestr(info, b"/etc/passwd")
    for path, data in breakage.extra_members.items():
        zf.writestr(path, data)


# ---------------------------------------------------------------------------------------------
# C sources

HELPER = "int helper(void) { return 41; }\nint helper_old(void) { return 1; }\n"
HELPER_V2 = "int helper(void) { return 42; }\n"
EXTENSION = """
extern int helper(void);
extern void *PyLong_FromLong(long);
void *PyInit_{mod}(void) {{ return PyLong_FromLong(helper()); }}
"""
EXTENSION_OLD_API = """
extern int helper_old(void);
extern void *PyLong_FromLong(long);
void *PyInit_{mod}(void) {{ return PyLong_FromLong(helper_old()); }}
"""
LONELY_EXTENSION = """
extern void *PyLong_FromLong(long);
void *PyInit_{mod}(void) {{ return PyLong_FromLong(7); }}
"""
STATIC_PYTHON = """
extern void *PyLong_FromLong(long);
int _Py_Something = 1;
void Py_Initialize(void) {{ }}
void *PyInit_{mod}(void) {{ Py_Initialize(); return PyLong_FromLong(_Py_Something); }}
"""
WRONG_INIT = """
extern void *PyLong_FromLong(long);
void *PyInit_somebody_else(void) { return PyLong_FromLong(1); }
"""
CUDART = "int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n"
USES_CUDART = """
extern int cudaGetDeviceCount(int *);
int infinirt_devices(void) { int n = 0; cudaGetDeviceCount(&n); return n; }
"""
NEW_GLIBC = """
#include <pthread.h>
static void *run(void *arg) { return arg; }
int spawn(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }
"""
FAKE_LIBPYTHON = "int Py_IsInitialized(void) { return 1; }\n"


@dataclass(frozen=True)
class Corpus:
    """Every test wheel, by what it shows; ``build`` holds the objects they were made from."""

    wheels: Mapping[str, Path]
    build: Path

    def __getitem__(self, key: str) -> Path:
        return self.wheels[key]


FLASH_ATTN = "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"


def uses_site_root_library(
    cc: Compiler, *, runpath: str | None, links: Sequence[Path] = ()
) -> Path:
    """``libops.so`` needing FLASH_ATTN: a library that a distribution installs at the top of
    site-packages with no SONAME (as flash-attn's torch extension), so linked by ``-l:NAME``."""
    fa = cc.shared(FLASH_ATTN, "int mha_fwd_kvcache(int x) { return x; }\n")
    return cc.shared(
        "libops.so",
        "extern int mha_fwd_kvcache(int);\n"
        "int ops_attention(int x) { return mha_fwd_kvcache(x); }\n",
        soname="libops.so",
        runpath=runpath,
        links=links,
        flags=[f"-L{fa.parent}", f"-l:{FLASH_ATTN}"],
    )


def corpus(root: Path) -> Corpus:
    """Compile and zip the shared set of wheels (about 15 gcc runs)."""
    cc = Compiler(root / "build")
    out = root / "wheels"
    helper = cc.shared("libhelper.so", HELPER, soname="libhelper.so")
    ext = cc.shared(
        f"_core{EXT}", EXTENSION.format(mod="_core"), links=[helper], runpath="$ORIGIN/lib"
    )
    base = {"demo/__init__.py": b"", f"demo/_core{EXT}": ext, "demo/lib/libhelper.so": helper}
    w: dict[str, Path] = {}
    w["clean"] = make_wheel(out / "clean", base)
    leaky = cc.shared(
        f"_core{EXT}",
        EXTENSION.format(mod="_core"),
        links=[helper],
        runpath=f"$ORIGIN/lib:{helper.parent}",
    )
    w["build_dir_runpath"] = make_wheel(out / "leak", {**base, f"demo/_core{EXT}": leaky})
    fake_py = cc.shared("libpython3.11.so.1.0", FAKE_LIBPYTHON, soname="libpython3.11.so.1.0")
    linked = cc.shared(
        f"_core{EXT}", EXTENSION.format(mod="_core"), links=[helper, fake_py], runpath="$ORIGIN/lib"
    )
    w["libpython_needed"] = make_wheel(out / "libpython", {**base, f"demo/_core{EXT}": linked})
    static = cc.shared(f"_static{EXT}", STATIC_PYTHON.format(mod="_static"))
    w["static_python"] = make_wheel(
        out / "static", {"demo/__init__.py": b"", f"demo/_static{EXT}": static}
    )
    wrong = cc.shared(f"_wrong{EXT}", WRONG_INIT)
    w["no_pyinit"] = make_wheel(
        out / "noinit", {"demo/__init__.py": b"", f"demo/_wrong{EXT}": wrong}
    )
    w["missing_library"] = make_wheel(
        out / "missing", {"demo/__init__.py": b"", f"demo/_core{EXT}": ext}
    )
    old = cc.shared(
        f"_core{EXT}", EXTENSION_OLD_API.format(mod="_core"), links=[helper], runpath="$ORIGIN/lib"
    )
    helper2 = cc.shared("libhelper.so", HELPER_V2, soname="libhelper.so")
    w["undefined_symbol"] = make_wheel(
        out / "undef", {**base, f"demo/_core{EXT}": old, "demo/lib/libhelper.so": helper2}
    )
    _distribution_wheels(cc, out, w)
    _archive_wheels(out, base, w)
    _tag_and_garbage_wheels(cc, out, base, w)
    _real_world_wheels(cc, out, base, w)
    return Corpus(w, cc.root)


def _distribution_wheels(cc: Compiler, out: Path, w: dict[str, Path]) -> None:
    cudart = cc.shared("libcudart.so.13", CUDART, soname="libcudart.so.13")
    rt = cc.shared(
        "libinfinirt.so",
        USES_CUDART,
        soname="libinfinirt.so",
        links=[cudart],
        runpath="$ORIGIN/../../nvidia/cu13/lib",
    )
    ext = cc.shared(
        f"_rt{EXT}", LONELY_EXTENSION.format(mod="_rt"), links=[rt], runpath="$ORIGIN/lib"
    )
    files = {"demo/__init__.py": b"", f"demo/_rt{EXT}": ext, "demo/lib/libinfinirt.so": rt}
    w["distribution_declared"] = make_wheel(
        out / "dist-ok", files, version="1.0+cu130", requires=["nvidia-cuda-runtime>=13"]
    )
    w["distribution_undeclared"] = make_wheel(out / "dist-missing", files, version="1.0+cu130")
    unreached = cc.shared(
        "libinfinirt.so", USES_CUDART, soname="libinfinirt.so", links=[cudart], runpath="$ORIGIN"
    )
    w["distribution_unreached"] = make_wheel(
        out / "dist-unreached",
        {**files, "demo/lib/libinfinirt.so": unreached},
        version="1.0+cu130",
        requires=["nvidia-cuda-runtime"],
    )
    # Two libraries need libcudart.so.13; only the first has no RUNPATH to it. ld.so would
    # stop at that one, and it alone is at fault.
    lonely = cc.shared("libops.so", USES_CUDART, soname="libops.so", links=[cudart])
    both = cc.shared(
        f"_rt{EXT}", LONELY_EXTENSION.format(mod="_rt"), links=[lonely, rt], runpath="$ORIGIN/lib"
    )
    w["distribution_unreached_by_one"] = make_wheel(
        out / "dist-unreached-one",
        {**files, f"demo/_rt{EXT}": both, "demo/lib/libops.so": lonely},
        version="1.0+cu130",
        requires=["nvidia-cuda-runtime"],
    )
    ops = uses_site_root_library(cc, runpath="$ORIGIN/../..")  # demo/lib -> site-packages
    ops_ext = cc.shared(
        f"_ops{EXT}", LONELY_EXTENSION.format(mod="_ops"), links=[ops], runpath="$ORIGIN/lib"
    )
    root_files = {"demo/__init__.py": b"", f"demo/_ops{EXT}": ops_ext, "demo/lib/libops.so": ops}
    w["site_root_declared"] = make_wheel(
        out / "root-ok", root_files, version="1.0+cu130", requires=["flash-attn"]
    )
    w["site_root_undeclared"] = make_wheel(out / "root-missing", root_files, version="1.0+cu130")
    driver = cc.shared(
        "libcuda.so.1", "int cuInit(unsigned f) { return (int)f; }\n", soname="libcuda.so.1"
    )
    uses_driver = cc.shared(
        "libinfinirt.so",
        "extern int cuInit(unsigned);\nint rt_init(void) { return cuInit(0); }\n",
        soname="libinfinirt.so",
        links=[driver],
    )
    w["driver_external"] = make_wheel(
        out / "driver", {**files, "demo/lib/libinfinirt.so": uses_driver}, version="1.0+cu130"
    )


def _archive_wheels(out: Path, base: Mapping[str, bytes | Path], w: dict[str, Path]) -> None:
    w["tampered_record"] = make_wheel(
        out / "tampered", base, breakage=Breakage(tamper_record="demo/lib/libhelper.so")
    )
    w["dotdot_member"] = make_wheel(out / "dotdot", base, breakage=Breakage(dotdot=True))
    w["duplicate_member"] = make_wheel(
        out / "dup", base, breakage=Breakage(duplicate="demo/__init__.py")
    )
    w["symlink_member"] = make_wheel(out / "symlink", base, breakage=Breakage(symlink=True))


def _tag_and_garbage_wheels(
    cc: Compiler, out: Path, base: Mapping[str, bytes | Path], w: dict[str, Path]
) -> None:
    new = cc.shared("libspawn.so", NEW_GLIBC, soname="libspawn.so", flags=["-pthread"])
    w["overclaimed_tag"] = make_wheel(
        out / "overclaim",
        {**base, "demo/lib/libspawn.so": new},
        tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64",
    )
    w["honest_manylinux"] = make_wheel(
        out / "honest", base, tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64"
    )
    whole = Path(str(base["demo/lib/libhelper.so"])).read_bytes()
    w["truncated_elf"] = make_wheel(out / "trunc", {**base, "demo/lib/libbroken.so": whole[:200]})
    w["garbage_so"] = make_wheel(out / "garbage", {**base, "demo/lib/libtext.so": b"INPUT(x)\n"})
    not_wheel = out / "notwheel" / "demo-1.0-py3-none-any.whl"
    not_wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(not_wheel, "w") as zf:
        zf.writestr("readme.txt", b"just a zip\n")
    w["zip_not_wheel"] = not_wheel


# ---------------------------------------------------------------------------------------------
# Shapes met in real wheels (the differential run against auditwheel, tests/differential/)

DEFINES_VALUE = """
extern void *PyLong_FromLong(long);
int {mod}_value(void) {{ return 2; }}
void *PyInit_{mod}(void) {{ return PyLong_FromLong({mod}_value()); }}
"""
USES_VALUE = """
extern int {other}_value(void);
extern void *PyLong_FromLong(long);
void *PyInit_{mod}(void) {{ return PyLong_FromLong({other}_value()); }}
"""
USES_LIBX = """
extern int libx_value(void);
extern void *PyLong_FromLong(long);
int _b_value(void) { return libx_value(); }
void *PyInit__b(void) { return PyLong_FromLong(libx_value()); }
"""
USES_SQRT = """
extern double sqrt(double);
extern void *PyFloat_FromDouble(double);
void *PyInit__m(void) { return PyFloat_FromDouble(sqrt(2.0)); }
"""
RPATH_BOTH = "$ORIGIN:$ORIGIN/lib"
RAW_LIBRARY = "int thing_start(int x) { return x + 1; }\n"


def _needs_extension(
    cc: Compiler, first: str, second: str, rpath: str | None = None
) -> tuple[Path, Path]:
    """The extension ``first`` needing the extension ``second`` (no SONAME, so linked by
    ``-l:NAME``, which records the bare file name) through RUNPATH ``$ORIGIN`` or the DT_RPATH
    ``rpath``; and ``second``."""
    defined = cc.shared(f"{second}{EXT}", DEFINES_VALUE.format(mod=second))
    flags = [f"-L{defined.parent}", f"-l:{second}{EXT}"]
    if rpath is not None:
        flags.append(f"-Wl,--disable-new-dtags,-rpath,{rpath}")
    needing = cc.shared(
        f"{first}{EXT}",
        USES_VALUE.format(mod=first, other=second),
        runpath="$ORIGIN" if rpath is None else None,
        flags=flags,
    )
    return needing, defined


def _real_world_wheels(
    cc: Compiler, out: Path, base: Mapping[str, bytes | Path], w: dict[str, Path]
) -> None:
    manylinux = f"{TAG}-{TAG}-manylinux_2_17_x86_64"
    for label, first, second, rpath in (
        ("extension_needs_extension", "_a", "_b", None),  # the needing one sorts first (pysam)
        ("extension_needed_first", "_b", "_a", None),
        ("extension_needs_extension_rpath", "_a", "_b", "$ORIGIN"),  # pysam's DT_RPATH shape
    ):
        needing, defined = _needs_extension(cc, first, second, rpath)
        files: dict[str, bytes | Path] = {"demo/__init__.py": b"", f"demo/{first}{EXT}": needing}
        w[label] = make_wheel(out / label, {**files, f"demo/{second}{EXT}": defined}, tag=manylinux)
    _rpath_inheritance_wheel(cc, out, w)
    w["compressed_wheel_tag"] = make_wheel(
        out / "compressed", base, tag=f"{manylinux}.manylinux2014_x86_64"
    )
    legacy = f"{TAG}-{TAG}-manylinux2014_x86_64"
    for label, pep600 in (("alias_wheel_tag", "2_17"), ("other_wheel_tag", "2_28")):
        w[label] = make_wheel(  # the file name's tag alone, WHEEL's beside another (xgboost-cpu)
            out / label,
            base,
            tag=legacy,
            wheel_tags=[legacy, f"{TAG}-{TAG}-manylinux_{pep600}_x86_64"],
        )
    w["manylinux_2_18"] = make_wheel(out / "m218", base, tag=f"{TAG}-{TAG}-manylinux_2_18_x86_64")
    spawn = cc.shared("libspawn.so", NEW_GLIBC, soname="libspawn.so", flags=["-pthread"])
    w["overclaimed_manylinux_2_18"] = make_wheel(
        out / "m218-over",
        {**base, "demo/lib/libspawn.so": spawn},
        tag=f"{TAG}-{TAG}-manylinux_2_18_x86_64",
    )
    libm = cc.shared(f"_m{EXT}", USES_SQRT, flags=["-fno-builtin"])  # no -lm
    w["libm_from_the_interpreter"] = make_wheel(
        out / "libm", {"demo/__init__.py": b"", f"demo/_m{EXT}": libm}, tag=manylinux
    )
    raw = cc.shared("_raw_thing.abi3.so", RAW_LIBRARY)
    w["ctypes_library_named_abi3"] = make_wheel(
        out / "ctypes",
        {"demo/__init__.py": b"", "demo/_raw_thing.abi3.so": raw},
        tag="cp36-abi3-manylinux_2_17_x86_64",
    )


def _rpath_inheritance_wheel(cc: Compiler, out: Path, w: dict[str, Path]) -> None:
    """``_a`` (DT_RPATH ``$ORIGIN:$ORIGIN/lib``) needs the extension ``_b``, which needs
    ``lib/libx.so`` with no search path of its own: found when ``_a`` loads ``_b`` (an RPATH
    applies to what its object loads), not when ``_b`` is imported by itself."""
    libx = cc.shared("libx.so", "int libx_value(void) { return 3; }\n", soname="libx.so")
    _b = cc.shared(f"_b{EXT}", USES_LIBX, flags=[f"-L{libx.parent}", "-l:libx.so"])
    _a = cc.shared(
        f"_a{EXT}",
        USES_VALUE.format(mod="_a", other="_b"),
        flags=[f"-L{_b.parent}", f"-l:_b{EXT}", f"-Wl,--disable-new-dtags,-rpath,{RPATH_BOTH}"],
    )
    files: dict[str, bytes | Path] = {
        "demo/__init__.py": b"",
        f"demo/_a{EXT}": _a,
        f"demo/_b{EXT}": _b,
    }
    w["extension_rpath_inherited"] = make_wheel(
        out / "rpath-inherit",
        {**files, "demo/lib/libx.so": libx},
        tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64",
    )


def auditwheel_tag(wheel: Path, timeout: float = 600) -> str | None:
    """``auditwheel show``'s overall tag, as a user runs it; None when it gives no verdict (it
    fails or crashes)."""
    proc = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if proc.returncode != 0:
        return None
    try:
        tag = json.loads(proc.stdout).get("overall_tag")
    except (ValueError, AttributeError):
        return None
    return str(tag) if tag else None


def small_extension_wheel(out: Path) -> Path | None:
    """A wheel with one small ELF file (an extension module built with gcc); None without gcc."""
    if not have_gcc():
        return None
    ext = Compiler(out / "build").shared(f"_small{EXT}", LONELY_EXTENSION.format(mod="_small"))
    files: dict[str, bytes | Path] = {"small/__init__.py": b"", f"small/_small{EXT}": ext}
    return make_wheel(out, files, name="small", tag=f"{TAG}-{TAG}-manylinux_2_17_x86_64")


def zero_bomb(out_dir: Path, size: int = 4 << 30, name: str = "bomb") -> Path:
    """A wheel whose one data member inflates to ``size`` zero bytes (4 GiB: about 4.5 MB
    deflated), with a RECORD that states its true hash and size: nothing is wrong with it but
    its ratio."""
    dist_info = f"{name}-1.0.dist-info"
    member = f"{name}/zeros.bin"
    chunk = bytes(16 << 20)
    digest = hashlib.sha256()
    for _ in range(size // len(chunk)):
        digest.update(chunk)
    digest.update(bytes(size % len(chunk)))
    hashed = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    meta = {
        f"{name}/__init__.py": b"",
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: wheelmaker\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
    }
    record = [f"{p},{_digest(d)},{len(d)}" for p, d in meta.items()]
    record += [f"{member},sha256={hashed},{size}", f"{dist_info}/RECORD,,"]
    meta[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    target = out_dir / f"{name}-1.0-py3-none-any.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/__init__.py", b"")
        info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as fh:
            for _ in range(size // len(chunk)):
                fh.write(chunk)
            fh.write(bytes(size % len(chunk)))
        for path, data in meta.items():
            if path != f"{name}/__init__.py":
                zf.writestr(path, data)
    return target
