"""The release gate, and the reproducibility check it relies on.

``release`` runs preflight, build, a reproducible wheel (built twice, the second time from
fresh directories, and compared byte for byte), its audit, an import smoke test and the SBOM,
then writes the wheel, its SBOM, SHA256SUMS and the run report. Everything is assembled in a
temporary directory beside the output and renamed into place at the end: when any step fails,
nothing is written to the output directory.

The second build of ``--verify`` runs under a fresh state home and store whose paths are as long
as those the first build ran under (read from its store records): build directories and store
entries are new, sources come from the same git caches. The same length matters: CMake reserves
room in each binary for its build-tree RUNPATH (absolute store paths), so binaries built under
homes of different path lengths differ in layout however deterministic the compiler is.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import string
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import EXIT_AUDIT, AuditError, StackError, UsageError
from builder.layout import Layout
from builder.sources import file_digest

if TYPE_CHECKING:
    from builder.commands.common import Context
    from builder.commands.wheel import Built
    from builder.plan import Plan
    from builder.report import RunReport

SUMS = "SHA256SUMS"
REPORT = "release-report.json"
BUILD_REPORT = "build-report.json"


class ReproducibilityError(StackError):
    """Two builds from the same inputs gave different wheels."""

    exit_code = EXIT_AUDIT


# --- reproducibility ----------------------------------------------------------------------------


def first_difference(a: Path, b: Path) -> str | None:
    """None when the two wheels are byte-identical, else which member differs first, and how."""
    if a.read_bytes() == b.read_bytes():
        return None
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        left, right = za.infolist(), zb.infolist()
        for i, (x, y) in enumerate(zip(left, right, strict=False)):
            if x.filename != y.filename:
                return (
                    f"member {i + 1}: {x.filename} in the first wheel, {y.filename} in the second"
                )
            if za.read(x) != zb.read(y):
                return f"{x.filename}: contents differ ({_content_note(za.read(x), zb.read(y))})"
            for attr in ("date_time", "external_attr", "compress_type", "create_system"):
                if getattr(x, attr) != getattr(y, attr):
                    return (
                        f"{x.filename}: {attr} differs ({getattr(x, attr)} vs {getattr(y, attr)})"
                    )
        if len(left) != len(right):
            longer, which = (left, "first") if len(left) > len(right) else (right, "second")
            return f"{longer[min(len(left), len(right))].filename}: only in the {which} wheel"
    return "the zip archives differ outside their members (headers or comments)"


def _content_note(x: bytes, y: bytes) -> str:
    if len(x) != len(y):
        return f"{len(x)} vs {len(y)} bytes"
    offset = next(i for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q)
    return f"same size, first difference at byte {offset}"


def dir_of_length(near: Path, length: int) -> Path:
    """Create a new directory whose absolute path is ``length`` characters long, beside ``near``
    when that is possible, else under the temporary directory or ``/``."""
    alphabet = string.ascii_lowercase + string.digits
    for parent in (near.parent, Path(tempfile.gettempdir()), Path("/")):
        room = length - len(str(parent)) - 1
        if room < 1 or not os.access(parent, os.W_OK):
            continue
        for _ in range(1000):
            # Path components stay under 200 characters: a long name becomes nested ones.
            name = "".join(secrets.choice(alphabet) for _ in range(room))
            parts = [name[i : i + 200] for i in range(0, len(name), 201)]
            candidate = parent.joinpath(*parts) if len(parts) > 1 else parent / name
            if len(str(candidate)) != length:
                continue
            with contextlib.suppress(FileExistsError):
                candidate.parent.mkdir(parents=True, exist_ok=True)
                candidate.mkdir()
                return candidate
    raise StackError(f"cannot create a directory with a path of {length} characters near {near}")


def built_under(record: dict[str, Any]) -> tuple[Path, Path] | None:
    """The (home, store root) a store entry was built under, read from its record."""
    build_dir = record.get("build_dir")
    prefix = None
    for command in record.get("commands", []):
        argv = command.get("argv", command) if isinstance(command, dict) else command
        prefix = next(
            (
                a.split("=", 1)[1]
                for a in argv
                if isinstance(a, str) and a.startswith("-DCMAKE_INSTALL_PREFIX=")
            ),
            prefix,
        )
    if not build_dir or not prefix:
        return None
    return Path(build_dir).parent.parent, Path(prefix).parent.parent


@contextlib.contextmanager
def fresh_layout(layout: Layout, like: tuple[Path, Path] | None = None) -> Iterator[Layout]:
    """A fresh home and store, removed afterwards, whose paths are as long as ``like``'s (the home
    and store the first build ran under), or else as ``layout``'s."""
    home_like, store_like = like or (layout.home, layout.store_root)
    made: list[Path] = []
    try:
        home = dir_of_length(layout.home, len(str(home_like)))
        made.append(home)
        if store_like == home_like / "store":
            store = home / "store"
        else:
            store = dir_of_length(layout.store_root, len(str(store_like)))
            made.append(store)
        yield Layout(home=home, store_root=store)
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


# --- the release directory ----------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return file_digest(path).hex()


def write_sums(directory: Path) -> Path:
    """``SHA256SUMS`` over every other file in ``directory``, in ``sha256sum -c`` format."""
    lines = [
        f"{sha256_file(p)}  {p.name}"
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name != SUMS
    ]
    target = directory / SUMS
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def check_output_dir(out: Path) -> None:
    """The output directory must not exist yet, or be empty: it is replaced as a whole."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"the release directory {out} exists and is not empty",
            hint="give a new or empty directory; a release is written whole or not at all",
        )


@contextlib.contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """A temporary directory beside ``out``, renamed to ``out`` when the block succeeds."""
    check_output_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield staging
        if out.exists():
            out.rmdir()  # empty: checked above
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


@dataclass
class ReleaseReport:
    vendor: str
    manifest: str
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256
    ok: bool = False

    def step(self, name: str, **data: Any) -> None:
        self.steps[name] = data

    def write(self, directory: Path) -> Path:
        target = directory / REPORT
        target.write_text(json.dumps(self.__dict__, indent=2, default=str) + "\n", encoding="utf-8")
        return target


# --- the gate -----------------------------------------------------------------------------------


def run_release(args: Any, out: Path) -> Path:
    """Preflight, build, wheel (verified reproducible), audit, smoke, SBOM, SHA256SUMS -> ``out``.

    ``out`` is written whole at the end, or not at all.
    """
    from builder import sbom
    from builder.commands.common import context_from
    from builder.commands.wheel import pending_dir

    check_output_dir(out)
    sbom.require()
    gate = Gate(args, context_from(args))
    gate.preflight()
    plan, build_report = gate.build()
    with pending_dir(gate.ctx) as work, staged_output(out) as staging:
        built = gate.package(plan, work)
        gate.smoke(built.path)
        gate.write(built.path, build_report, staging)
    return out


class Gate:
    """The release's steps, each recorded in the report with its time and findings."""

    def __init__(self, args: Any, ctx: Context) -> None:
        self.args = args
        self.ctx = ctx
        self.report = ReleaseReport(vendor=ctx.vendor, manifest=ctx.stack.label)
        self._clock = time.monotonic()

    def done(self, step: str, **data: Any) -> None:
        self.report.step(step, seconds=round(time.monotonic() - self._clock, 3), **data)
        self._clock = time.monotonic()

    def preflight(self) -> None:
        """Every provider the wheel's components need, checked before any compile."""
        from builder import preflight

        ctx = self.ctx
        spec = ctx.stack.wheel
        components = [spec.component, *spec.bundle] if spec else []
        checked = preflight.require(ctx.stack, ctx.vendor, ctx.host, components, wheel=True)
        preflight.record(checked, ctx.layout)
        # The plan keeps the host facts `build` and `wheel` see, so that their store entries
        # are this release's: the gate checks, it does not change what is built.
        self.done("preflight", ok=True, providers=checked.fingerprints())

    def build(self) -> tuple[Plan, RunReport]:
        from builder.commands.build import build_plan, launcher_for
        from builder.commands.wheel import wheel_plan

        plan = wheel_plan(self.args, self.ctx)
        built = build_plan(
            self.ctx, plan, launcher=launcher_for(self.args.launcher), command="release"
        )
        self.done("build", ok=True, components={c.name: c.status for c in built.components})
        return plan, built

    def package(self, plan: Plan, work: Path) -> Built:
        """The wheel, audited; built twice and compared; repaired and audited again if asked."""
        from builder.commands import wheel as wheel_cmd

        epoch = wheel_cmd.epoch_for(self.ctx, plan)
        built = wheel_cmd.assemble(self.ctx, plan, work / "first", epoch=epoch)
        self.done("wheel", ok=True, wheel=built.path.name, epoch=epoch, audit="passed")
        if self.args.verify:
            wheel_cmd.verify_rebuild(self.args, self.ctx, plan, built, work / "second")
            self.done("verify", ok=True, identical=True)
        if self.args.repair:
            built = wheel_cmd.repair_and_audit(self.ctx, plan, built, work / "repaired")
            self.done("repair", ok=True, wheel=built.path.name, audit="passed")
        return built

    def smoke(self, wheel: Path) -> None:
        from builder.smoke import smoke

        result = smoke(wheel, self.ctx.vendor)
        print(result.render(), file=sys.stderr)
        if not result.ok or (self.args.strict and not result.complete):
            raise AuditError(f"the import smoke test of {wheel.name} failed:\n{result.render()}")
        self.done("smoke", **result.to_json())

    def write(self, built: Path, build_report: RunReport, staging: Path) -> None:
        """Wheel, SBOM (checked against CycloneDX's schema), reports, then SHA256SUMS."""
        from builder import sbom

        wheel = staging / built.name
        shutil.copyfile(built, wheel)
        document = sbom_of(wheel)
        problems = sbom.validate(document)
        if problems:
            raise AuditError(f"the SBOM in {wheel.name} is not valid CycloneDX: {problems[0]}")
        sbom_file = staging / (wheel.name.removesuffix(".whl") + ".cdx.json")
        sbom_file.write_text(document, encoding="utf-8")
        self.done(
            "sbom", ok=True, file=sbom_file.name, components=sbom.component_versions(document)
        )
        (staging / BUILD_REPORT).write_text(
            json.dumps(build_report.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
        )
        self.report.files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        self.report.ok = True
        self.report.write(staging)
        write_sums(staging)


def sbom_of(wheel: Path) -> str:
    """The SBOM a wheel carries in ``.dist-info/sboms/``."""
    from builder.sbom import SBOM_PATH

    with zipfile.ZipFile(wheel) as zf:
        name = next(
            (
                n
                for n in zf.namelist()
                if n.split("/", 1)[0].endswith(".dist-info") and n.split("/", 1)[-1] == SBOM_PATH
            ),
            None,
        )
        if name is None:
            raise StackError(f"{wheel.name} carries no SBOM ({SBOM_PATH} in its .dist-info)")
        return zf.read(name).decode()
