"""The release gate: preflight, build, the wheel and its audit, the import smoke test, the
vendor's runtime check (where its device is present; ``check: not run (...)`` otherwise), the
proof that a second build gives the same bytes, the SBOM, then the release directory (the wheel,
its SBOM, the check's output, SHA256SUMS and the reports). The proof comes after the check: a
second build started beside the first (at a lower CPU priority) runs on while the wheel is
audited, smoke-tested and checked; when the first build is a store hit, the second is all there
is to build, and the rest runs beside it. When an earlier release built the same inputs twice and
this wheel is the same bytes, that proof stands and nothing is built again
(:mod:`builder.pipeline.proofs`; ``--reverify`` builds it again anyway).

With several interpreters (``--python``, or stack.yaml's ``wheel.pythons``;
:mod:`builder.pipeline.targets`), one build makes every wheel: the components that do not use
Python are built once, those that do once per interpreter (:mod:`builder.plan_interpreters`);
then each interpreter's wheel is audited, smoke-tested and checked with that interpreter, and
byte-verified, and all of them go into one release directory with one SHA256SUMS.

Everything is assembled in a temporary directory beside the output and renamed into place at the
end: when any step fails, nothing is written to the output directory, and what the run made (its
wheels, the check's output, the logs, the report of its stages) goes to ``DIR.failed``
(:mod:`builder.pipeline.failed`), which the error names. The run report says which stage failed,
with its exit code.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core.errors import AuditError, CheckError, StackError
from builder.core.sanitize import parse as parse_profile
from builder.core.sanitize import refuse_release
from builder.engine import bound
from builder.pipeline import proofs, rebuild, targets
from builder.pipeline.build import build_plan, launcher_for
from builder.pipeline.built import Built
from builder.pipeline.context import Context, open_context, plan_for, sanitize_profile
from builder.pipeline.release_dir import (
    BUILD_REPORT,
    CHECK_LOG,
    ReleaseReport,
    check_output_dir,
    sbom_of,
    sha256_file,
    staged_output,
    write_sums,
)
from builder.pipeline.requests import PlanRequest, ReleaseRequest
from builder.pipeline.targets import Target
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
from builder.plan_interpreters import union_plan

if TYPE_CHECKING:
    from builder.checks.runtime import Device
    from builder.engine.report import RunReport
    from builder.plan import Plan

__all__ = ["run_release", "sbom_of"]


@dataclass(frozen=True)
class Made:
    """One interpreter's wheel as released, and its variant wheel when one was asked for."""

    target: Target
    plan: Plan
    wheel: Path
    variant: Path | None = None


# --- the gate -----------------------------------------------------------------------------------


def run_release(request: ReleaseRequest) -> Path:
    """Preflight, build, wheel (audited), smoke, the runtime check, the proof that a second
    build gives the same wheel, the variant wheel (when asked), SBOM, SHA256SUMS -> the
    request's output directory, written whole at the end or not at all."""
    from builder.pipeline import sbom

    out = request.output
    refuse_release(parse_profile(request.build.plan.sanitize))  # before any probe
    check_output_dir(out)
    sbom.require()
    ctx = with_max_size(open_context(request.build.stack, wheel=True), request.max_size)
    refuse_release(sanitize_profile(ctx, request.build.plan))  # stack.yaml's sanitize: too
    gate = Gate(request, ctx)
    selection = gate.preflight()
    made: list[Made] = []
    try:
        # The components' own suites run on the entries the wheel bundles, before it is made.
        suites = dataclasses.replace(selection, suites=True)
        plans = {t.tag: plan_for(t.ctx, suites) for t in gate.targets}
        plan = union_plan(plans) if len(plans) > 1 else plans[gate.targets[0].tag]
        others = [t.ctx for t in gate.targets[1:]]
        # No second build beside the first where an earlier one proved every wheel's inputs.
        gate.proofs = proofs.find_each(gate.targets, plans, look=not request.reverify)
        proven = all(gate.proofs.values())
        beside = request.verify and not proven and targets.one_length(gate.targets, plans)
        epoch, early_rebuild = second_build(
            gate.ctx, selection, plans[gate.targets[0].tag], verify=beside, others=others
        )
        with early_rebuild as early:
            build_report = gate.build(plan)
            with pending_dir(gate.ctx) as work, staged_output(out) as staging:
                try:
                    made = gate.wheels(plans, work, staging, epoch(), early, selection)
                    gate.write(made, build_report, staging)
                except StackError as exc:
                    gate.failed(exc, staging, work)  # before the two directories are removed
                    raise
        gate.record(build_report)
        written = [p for m in made for p in (m.wheel, m.variant) if p is not None]
        record_wheels(build_report, gate.ctx, [out / p.name for p in written])
    except StackError as exc:
        gate.failed(exc, None, None)
        raise
    if request.index is not None:  # after the release is whole, which a refusal leaves as it is
        from builder.pipeline.publish import index_release

        index_release(request.index, [out / m.wheel.name for m in made])
    return out


class Gate:
    """The release's steps, each recorded in the report with its time and findings (a stage of
    one interpreter's wheel named with its tag when there are several: ``smoke cp312``)."""

    def __init__(self, request: ReleaseRequest, ctx: Context) -> None:
        self.request = request
        self.ctx = ctx
        self.targets: tuple[Target, ...] = (Target(ctx=ctx),)
        self.report = ReleaseReport(vendor=ctx.vendor, manifest=ctx.stack.label)
        self._clock = time.monotonic()
        self._began = bound.mark()  # the release's CPU work, against the cores
        self._started = time.time()  # a run report written since is this release's
        self.stage = "preflight"  # the stage under way: the one a failure names
        self.run: RunReport | None = None
        self.kept: Path | None = None
        self._device: Device | None = None
        self.proofs: dict[str, proofs.Proof | None] = {}  # by interpreter tag

    def done(self, step: str, **data: Any) -> None:
        now = time.monotonic()
        at = round(time.time() - (now - self._clock), 3)  # when the stage began (epoch seconds)
        self.report.step(step, seconds=round(now - self._clock, 3), at=at, **data)
        self._clock = now

    def begin(self, stage: str) -> None:
        self.stage = stage

    def preflight(self) -> PlanRequest:
        """The interpreters, found; for each, every provider the wheel's components need and
        every runtime requirement of the wheel that the runtime check will need, checked
        before any compile."""
        selection = wheel_selection(self.ctx, self.request.build.plan)
        found = targets.resolve(self.ctx, targets.requested(self.ctx, self.request.pythons))
        for target in found:
            targets.require(target, selection.components)
        self.targets = found
        self.targets = tuple(self.requirements(t) for t in found)
        self.ctx = self.targets[0].ctx  # the build's context: the first interpreter's
        report = self.ctx.preflight
        self.done(
            "preflight",
            ok=True,
            providers=report.fingerprints() if report else {},
            unmet_requirements=[u.render() for t in self.targets for u in t.unmet],
            pythons={t.tag: t.python for t in self.targets if t.tag},
        )
        return selection

    def requirements(self, target: Target) -> Target:
        """The wheel's Requires-Dist ``target``'s interpreter lacks: a preflight failure when
        the runtime check will run there (for one of several interpreters: with --strict),
        a note when it will not."""
        from builder.checks.requirements import pip_line, unmet_error

        target = targets.with_unmet(target)
        if not target.unmet:
            return target
        python, missing = target.python, target.unmet
        listed = "\n".join(f"  {u.render()}" for u in missing)
        why = self.device_skipped()
        if why is None and (len(self.targets) == 1 or self.request.strict):
            raise unmet_error(python, missing)
        why = why or f"they are missing; install them with {pip_line(python, missing)}"
        print(
            f"note: the wheel's runtime requirements not installed for {python} "
            f"(the runtime check would need them; it will not run: {why}):\n{listed}",
            file=sys.stderr,
        )
        return target

    def device_skipped(self) -> str | None:
        """Why the runtime check will not run on this host, or None when it will."""
        if self.ctx.stack.vendors[self.ctx.vendor].check is None:
            return f"no check declared in vendors.{self.ctx.vendor}.check"
        device = self.device()
        return None if device.present else device.what

    def check_skipped(self, target: Target) -> str | None:
        """Why the runtime check will not run for ``target``'s wheel, or None when it will."""
        from builder.checks.requirements import pip_line

        why = self.device_skipped()
        if why is None and target.unmet:
            names = ", ".join(u.requirement for u in target.unmet)
            return (
                f"{names} not installed for {target.python}; "
                f"{pip_line(target.python, target.unmet)}"
            )
        return why

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

    def wheels(
        self,
        plans: dict[str, Plan],
        work: Path,
        staging: Path,
        epoch: int,
        early: rebuild.Rebuild | None,
        selection: PlanRequest,
    ) -> list[Made]:
        """Each interpreter's wheel: assembled and audited, repaired (when asked), smoke-tested
        and checked with its interpreter; then the proof, then the variant wheels."""
        firsts: list[tuple[Target, Built]] = []
        finals: list[Built] = []
        for target in self.targets:
            dest = work / target.tag if target.tag else work
            first = self.package(target, plans[target.tag], dest, epoch)
            built = self.repair(target, plans[target.tag], first, dest)
            self.smoke(target, built.path)
            self.check(target, built.path, staging)
            firsts.append((target, first))
            finals.append(built)
        self.verify(selection, plans, firsts, work, early)
        made = []
        for target, built in zip(self.targets, finals, strict=True):
            plan = plans[target.tag]
            dest = work / target.tag if target.tag else work
            variant = self.variant(target, plan, built, dest)
            made.append(Made(target=target, plan=plan, wheel=built.path, variant=variant))
        return made

    def package(self, target: Target, plan: Plan, work: Path, epoch: int) -> Built:
        """The wheel, with ``epoch`` (the second build's too), audited (its extension modules
        against its own interpreter tag)."""
        from builder.pipeline.targets import require_own_tag

        self.begin(target.stage("wheel"))
        built = assemble(target.ctx, plan, work / "first", epoch=epoch)
        require_own_tag(built.path)
        self.done(self.stage, ok=True, wheel=built.path.name, epoch=epoch, audit="passed")
        return built

    def repair(self, target: Target, plan: Plan, built: Built, work: Path) -> Built:
        """The wheel repaired and audited again, when asked; else ``built``."""
        if not self.request.repair:
            return built
        self.begin(target.stage("repair"))
        repaired = repair_and_audit(target.ctx, plan, built, work / "repaired")
        self.done(self.stage, ok=True, wheel=repaired.path.name, audit="passed")
        return repaired

    def verify(
        self,
        selection: PlanRequest,
        plans: dict[str, Plan],
        firsts: list[tuple[Target, Built]],
        work: Path,
        early: rebuild.Rebuild | None,
    ) -> None:
        """Every first wheel built again and compared. After the checks: the second build,
        started beside the first, has run on through the smoke tests and the checks, at a
        lower priority; without it (``INFINI_STACK_VERIFY=after``) it is built now, once per
        interpreter. A wheel an earlier release proved (the same inputs, the same bytes) is
        not built again; each wheel built twice here is recorded as proven."""
        if not self.request.verify:
            return
        self.begin("verify")
        if early is not None:  # started beside the first build, it proves every wheel
            early.finish_all([b.path for _, b in firsts], work / "second")
            todo, by = firsts, {}
        else:
            by = {
                b.path.name: run
                for t, b in firsts
                if (run := proofs.standing(self.proofs.get(t.tag), b.path))
            }
            todo = [(t, b) for t, b in firsts if b.path.name not in by]
            for target, first in todo:
                second = work / "second" / target.tag if target.tag else work / "second"
                verify_rebuild(target.ctx, selection, plans[target.tag], first, second)
        for target, first in todo:
            proofs.record(target.ctx.layout, plans[target.tag], first.path, self._run_name())
        wheels = [b.path.name for _, b in firsts]
        self.done(
            "verify", ok=True, identical=True, beside=early is not None, wheels=wheels, proven_by=by
        )

    def _run_name(self) -> str:
        from builder.engine.executor import run_id

        return run_id(self.run) if self.run is not None else "unknown"

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

    def variant(self, target: Target, plan: Plan, built: Built, work: Path) -> Path | None:
        """The PEP 825 variant wheel, when stack.yaml's wheel.variant (or --variant) asks."""
        from builder.pipeline import variant

        if not variant.wanted(target.ctx, self.request.variant):
            return None
        self.begin(target.stage("variant"))
        made = variant.variant_of(target.ctx, plan, built, work / "variant")
        self.done(self.stage, ok=True, wheel=made.path.name, audit="passed")
        return made.path

    def smoke(self, target: Target, wheel: Path) -> None:
        """Every file of the wheel loaded, installed for its own interpreter."""
        from builder.checks.smoke import smoke

        self.begin(target.stage("smoke"))
        result = smoke(wheel, self.ctx.vendor, python=target.python)
        print(result.render(), file=sys.stderr)
        if not result.ok or (self.request.strict and not result.complete):
            raise AuditError(f"the import smoke test of {wheel.name} failed:\n{result.render()}")
        self.done(self.stage, python=target.python, **result.to_json())

    def check(self, target: Target, wheel: Path, staging: Path) -> None:
        """The vendor's runtime check with the wheel's own interpreter, where its device is
        present and the wheel's requirements are installed there; never a silent pass."""
        from builder.checks.runtime import COLUMNS, run_check
        from builder.pipeline.check import failed

        self.begin(target.stage("check"))
        config = self.ctx.stack.vendors[self.ctx.vendor]
        why = self.check_skipped(target)
        if why is not None:
            said = (
                f"check: not run for {wheel.name} ({why})"
                if target.tag
                else f"check: not run ({why})"
            )
            print(said, file=sys.stderr)
            if self.request.strict:
                raise CheckError(f"{said}, and --strict asks for it")
            self.done(self.stage, ran=False, reason=why, wheel=wheel.name)
            return
        assert config.check is not None
        device = self.device()
        jobs = self.request.check_jobs
        result = run_check(wheel, self.ctx.vendor, config.check, target.python, jobs=jobs)
        log = f"check-{target.tag}.log" if target.tag else CHECK_LOG
        (staging / log).write_text(result.log(), encoding="utf-8")
        print(result.render(), file=sys.stderr)
        if not result.ok:
            raise failed(result)
        self.done(
            self.stage,
            ran=True,
            ok=True,
            script=config.check.name,
            device=device.what,
            wheel=wheel.name,
            python=target.python,
            rows=result.row_dicts(),  # report --html draws them as the check's table
            columns=list(COLUMNS),
            **result.pool(),
        )

    def write(self, made: list[Made], build_report: RunReport, staging: Path) -> None:
        """Each wheel (and its variant, with the variants.json index), its SBOM (checked
        against CycloneDX's schema) and stack-manifest.json, the reports, then SHA256SUMS."""
        from builder.pipeline.variant import write_index

        for one in made:
            self.write_wheel(one, staging)
        if any(m.variant for m in made):
            write_index(staging, self.ctx)
        (staging / BUILD_REPORT).write_text(
            json.dumps(build_report.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
        )
        self.report.files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        self.report.ok = True
        self.report.write(staging)
        write_sums(staging)

    def write_wheel(self, made: Made, staging: Path) -> None:
        from builder.pipeline import build_manifest, sbom

        self.begin(made.target.stage("sbom"))
        wheel = staging / made.wheel.name
        shutil.copyfile(made.wheel, wheel)
        if made.variant is not None:
            shutil.copyfile(made.variant, staging / made.variant.name)
        document = sbom_of(wheel)
        problems = sbom.validate(document)
        if problems:
            raise AuditError(f"the SBOM in {wheel.name} is not valid CycloneDX: {problems[0]}")
        sbom_file = staging / (wheel.name.removesuffix(".whl") + ".cdx.json")
        sbom_file.write_text(document, encoding="utf-8")
        versions = sbom.component_versions(document)
        self.done(self.stage, ok=True, file=sbom_file.name, components=versions)
        tag = made.target.tag
        name = build_manifest.NAME.replace(".json", f"-{tag}.json") if tag else build_manifest.NAME
        (staging / name).write_text(build_manifest.read_from_wheel(wheel), encoding="utf-8")
