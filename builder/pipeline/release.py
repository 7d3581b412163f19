"""The release gate: preflight, build, the wheel and its audit, the import smoke test, the
vendor's runtime check (where its device is present; ``check: not run (...)`` otherwise), the
proof that a second build gives the same bytes, the SBOM, then the release directory (the wheel,
its SBOM, the check's output, SHA256SUMS and the reports). The proof comes after the check: a
second build started beside the first (at a lower CPU priority) runs on while the wheel is
audited, smoke-tested and checked; when the first build is a store hit, the second is all there
is to build, and the rest runs beside it.

Everything is assembled in a temporary directory beside the output and renamed into place at the
end: when any step fails, nothing is written to the output directory, and what the run made (its
wheels, the check's output, the logs, the report of its stages) goes to ``DIR.failed``
(:mod:`builder.pipeline.failed`), which the error names. The run report says which stage failed,
with its exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core.digest import file_digest
from builder.core.errors import AuditError, CheckError, PreflightError, StackError, UsageError
from builder.core.sanitize import Profile
from builder.core.sanitize import parse as parse_profile
from builder.engine import bound
from builder.pipeline import rebuild
from builder.pipeline.build import build_plan, launcher_for
from builder.pipeline.built import Built
from builder.pipeline.context import (
    Context,
    open_context,
    plan_for,
    require_preflight,
    sanitize_profile,
)
from builder.pipeline.requests import PlanRequest, ReleaseRequest
from builder.pipeline.wheel import (
    assemble,
    pending_dir,
    record_wheels,
    repair_and_audit,
    second_build,
    verify_rebuild,
    wheel_selection,
    with_max_size,
)

if TYPE_CHECKING:
    from builder.checks.requirements import Unmet
    from builder.checks.runtime import Device
    from builder.engine.report import RunReport
    from builder.plan import Plan

SUMS = "SHA256SUMS"
REPORT = "release-report.json"
BUILD_REPORT = "build-report.json"
CHECK_LOG = "check.log"  # what the vendor's runtime check printed


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


def run_release(request: ReleaseRequest) -> Path:
    """Preflight, build, wheel (audited), smoke, the runtime check, the proof that a second
    build gives the same wheel, the variant wheel (when asked), SBOM, SHA256SUMS -> the
    request's output directory, written whole at the end or not at all."""
    from builder.pipeline import sbom

    out = request.output
    refuse_sanitized(parse_profile(request.build.plan.sanitize))  # before any probe
    check_output_dir(out)
    sbom.require()
    ctx = with_max_size(open_context(request.build.stack, wheel=True), request.max_size)
    refuse_sanitized(sanitize_profile(ctx, request.build.plan))  # stack.yaml's sanitize: too
    gate = Gate(request, ctx)
    selection = gate.preflight()
    staging: Path | None = None
    work: Path | None = None
    try:
        # The components' own suites run on the entries the wheel bundles, before it is made.
        plan = plan_for(gate.ctx, dataclasses.replace(selection, suites=True))
        epoch, early_rebuild = second_build(gate.ctx, selection, plan, verify=request.verify)
        with early_rebuild as early:
            build_report = gate.build(plan)
            with pending_dir(gate.ctx) as work, staged_output(out) as staging:
                try:
                    first = gate.package(plan, work, epoch())
                    built = gate.repair(plan, first, work)
                    gate.smoke(built.path)
                    gate.check(built.path, staging)
                    gate.verify(selection, plan, first, work, early)
                    made = gate.variant(plan, built, work)
                    gate.write(built.path, build_report, staging, variant=made)
                except StackError as exc:
                    gate.failed(exc, staging, work)  # before the two directories are removed
                    raise
        gate.record(build_report)
        record_wheels(build_report, gate.ctx, [out / p.name for p in (built.path, made) if p])
    except StackError as exc:
        gate.failed(exc, None, None)
        raise
    if request.index is not None:  # after the release is whole, which a refusal leaves as it is
        from builder.pipeline.publish import index_release

        index_release(request.index, [out / built.path.name])
    return out


def refuse_sanitized(profile: Profile | None) -> None:
    """A sanitized build is for local testing only: its wheel needs the sanitizer's runtime
    preloaded and is never released (``--sanitize none`` releases a stack.yaml that asks for
    one)."""
    if profile is not None:
        raise UsageError(
            f"a release is never sanitized ({profile.spec}): its wheel would need the "
            "sanitizer's runtime preloaded",
            hint="build a sanitized wheel with `wheel --sanitize` for local testing; release "
            "without --sanitize (or with --sanitize none over stack.yaml's sanitize:)",
        )


class Gate:
    """The release's steps, each recorded in the report with its time and findings."""

    def __init__(self, request: ReleaseRequest, ctx: Context) -> None:
        self.request = request
        self.ctx = ctx
        self.report = ReleaseReport(vendor=ctx.vendor, manifest=ctx.stack.label)
        self._clock = time.monotonic()
        self._began = bound.mark()  # the release's CPU work, against the cores
        self._started = time.time()  # a run report written since is this release's
        self.stage = "preflight"  # the stage under way: the one a failure names
        self.run: RunReport | None = None
        self.kept: Path | None = None
        self._device: Device | None = None

    def done(self, step: str, **data: Any) -> None:
        now = time.monotonic()
        at = round(time.time() - (now - self._clock), 3)  # when the stage began (epoch seconds)
        self.report.step(step, seconds=round(now - self._clock, 3), at=at, **data)
        self._clock = now

    def begin(self, stage: str) -> None:
        self.stage = stage

    def preflight(self) -> PlanRequest:
        """Every provider the wheel's components need, and every runtime requirement of the
        wheel that the runtime check will need, checked before any compile (the probe ran
        once, when the context was opened)."""
        selection = wheel_selection(self.ctx, self.request.build.plan)
        require_preflight(self.ctx, selection.components, wheel=True)
        unmet = self.requirements()
        report = self.ctx.preflight
        self.done(
            "preflight",
            ok=True,
            providers=report.fingerprints() if report else {},
            unmet_requirements=[u.render() for u in unmet],
        )
        return selection

    def requirements(self) -> list[Unmet]:
        """The wheel's Requires-Dist the target interpreter lacks: a preflight failure when
        the runtime check will run there, a note when it will not."""
        from builder.checks.requirements import pip_line, unmet

        spec = self.ctx.stack.wheel
        python = self.ctx.host.python
        missing = unmet(spec.requires, python) if spec is not None else []
        if not missing:
            return []
        listed = "\n".join(f"  {u.render()}" for u in missing)
        why = self.check_skipped()
        if why is None:
            raise PreflightError(
                f"the wheel's runtime requirements are not all installed for {python}, where "
                f"the runtime check runs:\n{listed}",
                hint=f"install them first: {pip_line(python, missing)}",
            )
        print(
            f"note: the wheel's runtime requirements not installed for {python} "
            f"(the runtime check would need them; it will not run: {why}):\n{listed}",
            file=sys.stderr,
        )
        return missing

    def check_skipped(self) -> str | None:
        """Why the runtime check will not run on this host, or None when it will."""
        if self.ctx.stack.vendors[self.ctx.vendor].check is None:
            return f"no check declared in vendors.{self.ctx.vendor}.check"
        device = self.device()
        return None if device.present else device.what

    def device(self) -> Device:
        """The vendor's device on this host, by its listing command (nvidia-smi -L, ...), run
        once per release."""
        from builder.checks.runtime import find_device
        from builder.vendors import get as get_vendor

        if self._device is None:
            self._device = find_device(get_vendor(self.ctx.vendor))
        return self._device

    def build(self, plan: Plan) -> RunReport:
        self.begin("build")
        launcher = launcher_for(self.request.build.launcher)
        cache = self.request.build.cache
        built = build_plan(
            self.ctx,
            plan,
            launcher=launcher,
            command="release",
            cache=cache,
            verify=True,  # an entry that fails its install manifest stops a release (exit 5)
            rebuild=False,
        )
        self.run = built
        self.done("build", ok=True, components={c.name: c.status for c in built.components})
        return built

    def package(self, plan: Plan, work: Path, epoch: int) -> Built:
        """The wheel, with ``epoch`` (the second build's too), audited."""
        self.begin("wheel")
        built = assemble(self.ctx, plan, work / "first", epoch=epoch)
        self.done("wheel", ok=True, wheel=built.path.name, epoch=epoch, audit="passed")
        return built

    def repair(self, plan: Plan, built: Built, work: Path) -> Built:
        """The wheel repaired and audited again, when asked; else ``built``."""
        if not self.request.repair:
            return built
        self.begin("repair")
        repaired = repair_and_audit(self.ctx, plan, built, work / "repaired")
        self.done("repair", ok=True, wheel=repaired.path.name, audit="passed")
        return repaired

    def verify(
        self,
        selection: PlanRequest,
        plan: Plan,
        first: Built,
        work: Path,
        early: rebuild.Rebuild | None,
    ) -> None:
        """The first wheel built again and compared. After the check: the second build,
        started beside the first, has run on through the smoke test and the check, at a lower
        priority; without it (``INFINI_STACK_VERIFY=after``) it is built now."""
        if not self.request.verify:
            return
        self.begin("verify")
        if early is not None:
            early.finish(first.path, work / "second")
        else:
            verify_rebuild(self.ctx, selection, plan, first, work / "second")
        self.done("verify", ok=True, identical=True, beside=early is not None)

    def record(self, run: RunReport) -> None:
        """The release's stages in the run report (``report`` and ``report --trace`` show
        them)."""
        run.release = {
            "ok": True,
            "output": str(self.request.output),
            "stages": dict(self.report.steps),
            "cpu": bound.since(self._began),
        }
        print(bound.render(run.release["cpu"], "release"), file=sys.stderr)

    def _failed_build(self) -> dict[str, Any] | None:
        """The run report of a build stage that failed (its components' logs go with the
        failed-run directory), if one was written since this release began."""
        from builder.engine import report as run_report

        if self.stage != "build":
            return None
        try:
            data = run_report.read_last(self.ctx.layout)
        except StackError:
            return None
        mine = data.get("command") == "release" and data.get("started", 0) >= self._started
        return data if mine else None

    def failed(self, exc: StackError, staging: Path | None, work: Path | None) -> None:
        """Keep what the run made in ``DIR.failed`` (once), name it in the error, and make the
        run report say which stage failed, with its exit code."""
        from builder.engine import report as run_report
        from builder.pipeline import failed

        if self.kept is not None or self.stage == "preflight":
            return
        self.done(self.stage, ok=False, error=exc.message, exit_code=exc.exit_code)
        data = {**self.report.__dict__, "failed_stage": self.stage, "exit_code": exc.exit_code}
        run = self.run.to_json() if self.run is not None else self._failed_build()
        self.kept = failed.keep(self.request.output, data, staging=staging, work=work, run=run)
        exc.message = f"{exc.message}\nwhat this release made is kept in {self.kept}"
        if self.run is not None:
            self.run.ok = False
            self.run.error = exc.message
            self.run.release = {
                "ok": False,
                "failed_stage": self.stage,
                "exit_code": exc.exit_code,
                "kept": str(self.kept),
                "stages": dict(self.report.steps),
            }
            run_report.write(self.run, self.ctx.layout)

    def variant(self, plan: Plan, built: Built, work: Path) -> Path | None:
        """The PEP 825 variant wheel, when stack.yaml's wheel.variant (or --variant) asks."""
        from builder.pipeline import variant

        if not variant.wanted(self.ctx, self.request.variant):
            return None
        self.begin("variant")
        made = variant.variant_of(self.ctx, plan, built, work / "variant")
        self.done("variant", ok=True, wheel=made.path.name, audit="passed")
        return made.path

    def smoke(self, wheel: Path) -> None:
        from builder.checks.smoke import smoke

        self.begin("smoke")
        result = smoke(wheel, self.ctx.vendor)
        print(result.render(), file=sys.stderr)
        if not result.ok or (self.request.strict and not result.complete):
            raise AuditError(f"the import smoke test of {wheel.name} failed:\n{result.render()}")
        self.done("smoke", **result.to_json())

    def check(self, wheel: Path, staging: Path) -> None:
        """The vendor's runtime check where its device is present; never a silent pass."""
        from builder.checks.runtime import COLUMNS, run_check
        from builder.pipeline.check import failed

        self.begin("check")
        config = self.ctx.stack.vendors[self.ctx.vendor]
        why = self.check_skipped()
        if why is not None:
            print(f"check: not run ({why})", file=sys.stderr)
            if self.request.strict:
                raise CheckError(f"check: not run ({why}), and --strict asks for it")
            self.done("check", ran=False, reason=why)
            return
        assert config.check is not None
        device = self.device()
        result = run_check(
            wheel,
            self.ctx.vendor,
            config.check,
            self.ctx.host.python,
            jobs=self.request.check_jobs,
        )
        (staging / CHECK_LOG).write_text(result.log(), encoding="utf-8")
        print(result.render(), file=sys.stderr)
        if not result.ok:
            raise failed(result)
        rows = result.row_dicts()  # report --html draws them as the check's table
        self.done(
            "check",
            ran=True,
            ok=True,
            script=config.check.name,
            device=device.what,
            rows=rows,
            columns=list(COLUMNS),
            **result.pool(),
        )

    def write(
        self, built: Path, build_report: RunReport, staging: Path, variant: Path | None = None
    ) -> None:
        """Wheel (and its variant with the variants.json index), SBOM (checked against
        CycloneDX's schema), the wheel's stack-manifest.json, reports, then SHA256SUMS."""
        from builder.pipeline import build_manifest, sbom
        from builder.pipeline.variant import write_index

        self.begin("sbom")
        wheel = staging / built.name
        shutil.copyfile(built, wheel)
        if variant is not None:
            shutil.copyfile(variant, staging / variant.name)
            write_index(staging, self.ctx)
        document = sbom_of(wheel)
        problems = sbom.validate(document)
        if problems:
            raise AuditError(f"the SBOM in {wheel.name} is not valid CycloneDX: {problems[0]}")
        sbom_file = staging / (wheel.name.removesuffix(".whl") + ".cdx.json")
        sbom_file.write_text(document, encoding="utf-8")
        self.done(
            "sbom", ok=True, file=sbom_file.name, components=sbom.component_versions(document)
        )
        manifest = build_manifest.read_from_wheel(wheel)
        (staging / build_manifest.NAME).write_text(manifest, encoding="utf-8")
        (staging / BUILD_REPORT).write_text(
            json.dumps(build_report.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
        )
        self.report.files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        self.report.ok = True
        self.report.write(staging)
        write_sums(staging)


def sbom_of(wheel: Path) -> str:
    """The SBOM a wheel carries in ``.dist-info/sboms/``."""
    from builder.pipeline.sbom import SBOM_PATH

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
