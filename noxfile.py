"""infini-stack's sessions: tests, lint, typecheck, demo, differential (the audit against
auditwheel on real wheels), and preflight/build/wheel/audit/release per vendor declared in
./stack.yaml (or $INFINI_STACK_MANIFEST). Arguments after -- go to the command a session runs:
nox -s "build(vendor='cpu')" -- --manifest examples/mini-stack/stack.yaml
"""

# A vendor session whose toolkit is absent is skipped with the preflight's reason; with
# INFINI_STACK_STRICT=1 (CI on the vendor's own runners) it fails instead.
#
# Environment: every session runs with venv_backend="none" in one Python environment, so the
# project is installed at most once and a session starts in milliseconds. That environment is the
# interpreter running nox when it already has the project's dependencies (README's command and CI
# install them there: pip install -e '.[dev]'); otherwise .nox/_env, a virtual environment created
# on first use and reinstalled only when pyproject.toml changes.

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import nox

nox.needs_version = ">=2024.4"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.error_on_external_run = True

ROOT = Path(__file__).resolve().parent
MINI = ROOT / "examples" / "mini-stack" / "stack.yaml"
DIST = Path(os.environ.get("INFINI_STACK_DIST") or ROOT / "dist")  # where sessions write wheels
ENV_DIR = ROOT / ".nox" / "_env"
RUNTIME_MODULES = ("yaml", "packaging", "elftools", "auditwheel", "pybind11")
DEV_MODULES = (
    *RUNTIME_MODULES,
    *("pytest", "mypy", "ruff", "check_jsonschema", "cyclonedx", "variantlib", "graphviz"),
)
DEMO_VENDORS = ("cpu", "nvidia")
EXIT_PREFLIGHT = 3
STRICT_ENV = "INFINI_STACK_STRICT"


# --- which vendors: read from the manifest, without needing PyYAML in nox's own environment ----


def manifest_path() -> Path:
    env = os.environ.get("INFINI_STACK_MANIFEST")
    return Path(env) if env else ROOT / "stack.yaml"


def declared_vendors(path: Path) -> list[str]:
    """The keys of the manifest's top-level ``vendors:`` mapping, canonical (``ali`` -> thead)."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    try:
        import yaml

        data = yaml.safe_load(text)
        names = [str(k) for k in (data.get("vendors") or {})] if isinstance(data, dict) else []
    except ImportError:  # nox installed on its own (pipx): a block scan is enough for keys
        names = _scan_vendor_keys(text)
    except Exception:  # a broken manifest must not break `nox -l`; the CLI reports it
        names = _scan_vendor_keys(text)
    return list(dict.fromkeys(_canonical(n) for n in names))


def _scan_vendor_keys(text: str) -> list[str]:
    names: list[str] = []
    inside = False
    indent: int | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        width = len(line) - len(line.lstrip())
        if width == 0:
            inside = line.startswith("vendors:")
            indent = None
            continue
        if inside:
            indent = width if indent is None else indent
            match = re.match(r"\s*([A-Za-z][\w-]*)\s*:", line)
            if width == indent and match:
                names.append(match.group(1))
    return names


def _canonical(name: str) -> str:
    sys.path.insert(0, str(ROOT))
    try:
        from builder.vendors import canonical_name  # standard library only

        return canonical_name(name)
    except Exception:
        return name.strip().lower()
    finally:
        sys.path.remove(str(ROOT))


VENDORS = declared_vendors(manifest_path()) or ["cpu"]


# --- the one environment --------------------------------------------------------------------


def tool_python(session: nox.Session, *, dev: bool = False) -> str:
    wanted = DEV_MODULES if dev else RUNTIME_MODULES
    if all(importlib.util.find_spec(m) is not None for m in wanted):
        return sys.executable
    return shared_env(session)


def shared_env(session: nox.Session) -> str:
    python = ENV_DIR / "bin" / "python"
    stamp = ENV_DIR / ".installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not python.exists():
        session.run(sys.executable, "-m", "venv", str(ENV_DIR), external=True)
    if not stamp.is_file() or stamp.read_text() != want:
        session.run(str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]", external=True)
        stamp.write_text(want)
    return str(python)


def cli(session: nox.Session, python: str, *args: str | os.PathLike[str]) -> None:
    session.run(python, "-m", "builder", *(str(a) for a in args), external=True)


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def context_args(
    posargs: Sequence[str], wanted: Sequence[str] = ("--manifest", "-m", "--home", "--store")
) -> list[str]:
    """The options in ``posargs`` that choose what preflight looks at (manifest, home, store)."""
    out: list[str] = []
    it = iter(posargs)
    for arg in it:
        name, eq, _ = arg.partition("=")
        if name in wanted:
            out += [arg] if eq else [arg, next(it, "")]
    return out


def preflight_or_skip(
    session: nox.Session, python: str, vendor: str, extra: Sequence[str] = ()
) -> None:
    """Run ``preflight``; a missing provider (exit 3) skips the session with its reason."""
    argv = [python, "-m", "builder", "preflight", "--vendor", vendor, *extra]
    session.log(" ".join(argv[1:]))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    output = (done.stdout + done.stderr).strip()
    if done.returncode == 0:
        if output:
            print(output)
        return
    if done.returncode == EXIT_PREFLIGHT:
        print(output)
        reason = f"{vendor}: {preflight_reason(output)}"
        if strict():
            session.error(f"preflight failed ({STRICT_ENV} is set): {reason}")
        session.skip(reason)
    session.error(f"preflight --vendor {vendor} exited {done.returncode}:\n{output}")


def preflight_reason(output: str) -> str:
    """The preflight's own words: each failing provider (with its first hint), else its error."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("error:")), None)
    if start is None:
        return next(
            (line.strip() for line in reversed(lines) if line.strip()),
            "a required provider is missing",
        )
    reasons: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("  ") and not line.startswith("   "):
            reasons.append(line.strip())
        elif line.strip().startswith("hint:") and reasons and "hint:" not in reasons[-1]:
            reasons[-1] += f" ({line.strip()})"
        elif not line.startswith(" "):
            break
    return "; ".join(reasons) or lines[start].removeprefix("error:").strip()


def vendor_dist(vendor: str) -> Path:
    return DIST / vendor


# --- the project's own checks ------------------------------------------------------------------


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Run the test suite with pytest (arguments after -- go to pytest)."""
    python = tool_python(session, dev=True)
    session.run(python, "-m", "pytest", *session.posargs, external=True)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """Lint and check formatting with ruff; check the layers with import-linter (pyproject.toml's
    [tool.importlinter] contracts)."""
    python = tool_python(session, dev=True)
    paths = session.posargs or ["."]
    session.run(python, "-m", "ruff", "check", *paths, external=True)
    session.run(python, "-m", "ruff", "format", "--check", *paths, external=True)
    session.run(str(Path(python).parent / "lint-imports"), "--no-cache", external=True)


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    """Type-check builder/, wheels/ and this noxfile with mypy --strict."""
    python = tool_python(session, dev=True)
    session.run(python, "-m", "mypy", *session.posargs, external=True)
    session.run(python, "-m", "mypy", "--strict", "noxfile.py", external=True)


@nox.session(venv_backend="none", default=False)
def differential(session: nox.Session) -> None:
    """Audit the pinned real wheels of tests/differential/wheels.txt with auditwheel show and
    infini-stack audit (downloaded into a cache outside the repository, see
    benchmarks/differential.py for the options after --); fails on a disagreement that
    known-differences.txt does not list, and on any internal error of ours."""
    python = tool_python(session)
    session.run(
        python, str(ROOT / "benchmarks" / "differential.py"), *session.posargs, external=True
    )


@nox.session(venv_backend="none")
def matrix(session: nox.Session) -> None:
    """Print the CI matrix (vendor x Python) generated from stack.yaml."""
    cli(session, tool_python(session), "ci", "matrix", "--pretty", *session.posargs)


@nox.session(venv_backend="none", default=False)
def demo(session: nox.Session) -> None:
    """Main job on the bundled mini stack: preflight, build, wheel, audit, smoke and the runtime
    check where the vendor's device is (cpu, nvidia)."""
    python = tool_python(session)
    done: list[str] = []
    for vendor in DEMO_VENDORS:
        manifest = ["--manifest", str(MINI)]
        argv = [python, "-m", "builder", "preflight", "--vendor", vendor, *manifest]
        check = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        if check.returncode == EXIT_PREFLIGHT:
            session.warn(
                f"demo: skipping {vendor}: {preflight_reason(check.stdout + check.stderr)}"
            )
            continue
        out = DIST / "demo" / vendor
        shutil.rmtree(out, ignore_errors=True)
        cli(session, python, "preflight", "--vendor", vendor, *manifest)
        cli(session, python, "build", "--vendor", vendor, *manifest)
        cli(session, python, "wheel", "--vendor", vendor, *manifest, "--out", out)
        wheels = sorted(out.glob("*.whl"))
        cli(session, python, "audit", *wheels, "--vendor", vendor, *manifest)
        for wheel in wheels:
            cli(session, python, "smoke", wheel, "--vendor", vendor)
            run_check(session, python, wheel, vendor)
        done.append(vendor)
    if "cpu" not in done:
        session.error("demo: the cpu stack did not run")
    session.log(
        f"demo: {', '.join(done)} built, packaged, audited and imported; wheels in {DIST / 'demo'}"
    )


def run_check(session: nox.Session, python: str, wheel: Path, vendor: str) -> None:
    """The vendor's runtime check; without its device here, said (never passed silently)."""
    argv = [python, "-m", "builder", "check", str(wheel), "--manifest", str(MINI)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode == EXIT_PREFLIGHT:  # no device here: a note, an error only when strict
        said = (done.stderr.strip().splitlines() or ["check: not run"])[-1]
        said = said.removeprefix("error:").strip()
        if strict():
            session.error(f"demo: {vendor}: {said} ({STRICT_ENV} is set)")
        session.log(f"note: demo: {vendor}: {said}")
        return
    session.log(done.stderr.strip())
    if done.returncode != 0:
        session.error(f"demo: the {vendor} check failed:\n{done.stdout}{done.stderr}")


# --- per vendor ---------------------------------------------------------------------------------


@nox.session(venv_backend="none", default=False)
@nox.parametrize("vendor", VENDORS)
def preflight(session: nox.Session, vendor: str) -> None:
    """Check this host has the vendor's providers (toolkits, libraries) before any compile."""
    python = tool_python(session)
    preflight_or_skip(session, python, vendor, session.posargs)


@nox.session(venv_backend="none", default=False)
@nox.parametrize("vendor", VENDORS)
def build(session: nox.Session, vendor: str) -> None:
    """Build the vendor's stack into the store (store hits cost nothing)."""
    python = tool_python(session)
    preflight_or_skip(session, python, vendor, context_args(session.posargs))
    cli(session, python, "build", "--vendor", vendor, *session.posargs)


@nox.session(venv_backend="none", default=False)
@nox.parametrize("vendor", VENDORS)
def wheel(session: nox.Session, vendor: str) -> None:
    """Build, package and audit the vendor's wheel into dist/<vendor>/."""
    python = tool_python(session)
    preflight_or_skip(session, python, vendor, context_args(session.posargs))
    cli(
        session, python, "wheel", "--vendor", vendor, "--out", vendor_dist(vendor), *session.posargs
    )


@nox.session(venv_backend="none", default=False)
@nox.parametrize("vendor", VENDORS)
def audit(session: nox.Session, vendor: str) -> None:
    """Audit the vendor's wheels in dist/<vendor>/ against its policy."""
    python = tool_python(session)
    wheels = sorted(vendor_dist(vendor).glob("*.whl"))
    if not wheels:
        reason = f"no wheel in {vendor_dist(vendor)}: run wheel(vendor={vendor!r}) first"
        if strict():
            session.error(reason)
        session.skip(reason)
    cli(session, python, "audit", *wheels, "--vendor", vendor, *session.posargs)


@nox.session(venv_backend="none", default=False)
@nox.parametrize("vendor", VENDORS)
def release(session: nox.Session, vendor: str) -> None:
    """Release gate into dist/release/<vendor>/: reproducible wheel, audit, smoke, SBOM, sums."""
    python = tool_python(session)
    preflight_or_skip(session, python, vendor, context_args(session.posargs))
    out = DIST / "release" / vendor
    shutil.rmtree(out, ignore_errors=True)
    cli(session, python, "release", "--vendor", vendor, "-o", out, *session.posargs)


SANITIZE_PROFILES = ("address,undefined", "thread")


@nox.session(venv_backend="none", default=False)
@nox.parametrize("profile", SANITIZE_PROFILES)
@nox.parametrize("vendor", VENDORS)
def sanitize(session: nox.Session, vendor: str, profile: str) -> None:
    """Build with tests, package, smoke and check the vendor's stack under a sanitizer profile
    into dist/sanitize/<vendor>/ (docs/sanitizers.md); its wheel is never released."""
    python = tool_python(session)
    context = context_args(session.posargs)
    preflight_or_skip(session, python, vendor, context)
    out = DIST / "sanitize" / vendor
    shutil.rmtree(out, ignore_errors=True)
    flags = ("--vendor", vendor, "--sanitize", profile, *session.posargs)
    cli(session, python, "build", "--test", *flags)
    cli(session, python, "wheel", "--out", out, *flags)
    manifest = context_args(session.posargs, ("--manifest", "-m"))  # all that check takes
    for wheel in sorted(out.glob("*.whl")):
        cli(session, python, "smoke", wheel, "--vendor", vendor)
        cli(session, python, "check", wheel, "--vendor", vendor, *manifest)


# --- the HTML report in a real browser ----------------------------------------------------------

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium(session: nox.Session) -> str:
    """Debian's chromium, installed with apt-get when it is not there yet."""
    found = shutil.which("chromium")
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    session.run(*sudo, "apt-get", "update", external=True)
    session.run(*sudo, "apt-get", "install", "-y", "chromium", external=True)
    found = shutil.which("chromium")
    if not found:
        session.error("apt-get installed no chromium command")
    return found


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@nox.session(name="report-browser", venv_backend="none", default=False)
def report_browser(session: nox.Session) -> None:
    """Build the mini stack's cpu wheel, write `report --html`, render it in headless Chromium
    (a screenshot and the DOM it built) and check the timeline and the wheel's graph are there.
    Writes dist/report-browser/: report.html, report.png, report.dom.html."""
    python = tool_python(session)
    browser = chromium(session)
    out = DIST / "report-browser"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    session.env["INFINI_STACK_HOME"] = str(out / "home")
    cli(session, python, "wheel", "--manifest", MINI, "--vendor", "cpu", "--out", out / "dist")
    page = out / "report.html"
    cli(session, python, "report", "--html", page)
    profile = out / "chromium-profile"
    flags = [*BROWSER_FLAGS, f"--user-data-dir={profile}"]
    png = out / "report.png"
    shot = [f"--screenshot={png}", "--window-size=1400,2000", page.as_uri()]
    session.run(browser, *flags, *shot, external=True)
    dom = session.run(browser, *flags, "--dump-dom", page.as_uri(), external=True, silent=True)
    shutil.rmtree(profile, ignore_errors=True)
    text = str(dom or "")
    (out / "report.dom.html").write_text(text, encoding="utf-8")
    wanted = {
        "the timeline": 'id="timeline-svg"',
        "a component on it": 'data-component="minilm"',
        "the components table": 'id="components-table"',
        "the wheel's graph": 'class="graph"',
    }
    missing = [what for what, marker in wanted.items() if marker not in text]
    if missing:
        session.error(f"the rendered page lacks {', '.join(missing)}")
    if png_size(png) != (1400, 2000):
        session.error(f"{png} is not a 1400x2000 screenshot")
    session.log(f"rendered: {png} ({png.stat().st_size} bytes); the DOM has {len(wanted)} parts")
