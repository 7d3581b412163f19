"""The vendor's wheel: assembled from the store, audited, and only then published.

``verify`` builds the stack and the wheel a second time from fresh directories and requires the
two wheels to be byte-identical; ``repair`` retags the wheel manylinux with auditwheel, never
grafting the vendor's external libraries, and audits the result again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from builder import __version__
from builder.core import proc
from builder.core.errors import UsageError
from builder.manifest.model import GitSource, Source, WorktreeSource
from builder.pipeline.build import build_plan, launcher_for
from builder.pipeline.built import Built, audit_or_keep, sbom_finisher
from builder.pipeline.context import (
    Context,
    open_context,
    plan_for,
    require_preflight,
    wheel_components,
)
from builder.pipeline.requests import PlanRequest, StackRequest, WheelRequest
from builder.plan import Plan

if TYPE_CHECKING:
    from builder.engine.report import RunReport
    from builder.pipeline.rebuild import Rebuild
from builder.vendors import get as get_vendor
from wheels.assemble import (
    WheelInputs,
    build_wheel,
    pack,
    wheel_epoch,
)
from wheels.naming import partner_local, sanitized_local, wheel_name, worktree_local
from wheels.policy import DistLib, load_vendor_policy


def run_wheel(request: WheelRequest) -> list[Path]:
    """Build, assemble, audit (verify, repair), then write the wheel to ``request.out``; with
    a variant, its variant wheel and the release's variants.json too. Returns what it wrote."""
    from builder.pipeline import variant

    ctx = with_max_size(open_context(request.build.stack, wheel=True), request.max_size)
    selection = wheel_selection(ctx, request.build.plan)
    require_preflight(ctx, selection.components, wheel=True)
    plan = plan_for(ctx, selection)
    launcher = launcher_for(request.build.launcher)
    epoch, early_rebuild = second_build(ctx, selection, plan, verify=request.verify)
    with early_rebuild as early, pending_dir(ctx) as work:
        report = build_plan(
            ctx,
            plan,
            launcher=launcher,
            command="wheel",
            cache=request.build.cache,
            verify=True,
            rebuild=not request.no_rebuild,
        )
        built = assemble(ctx, plan, work / "first", epoch=epoch())
        second = None
        if early is not None:
            second = early.finish(built.path, work / "second")
        elif request.verify:
            second = verify_rebuild(ctx, selection, plan, built, work / "second")
        if request.repair:
            built, second = repair_and_audit(ctx, plan, built, work / "repaired"), None
        made = [built]
        if variant.wanted(ctx, request.variant):
            made.append(variant.variant_of(ctx, plan, built, work / "variant"))
            if second is not None:
                variant.verify(ctx, plan, made[-1], dataclasses.replace(built, path=second), work)
        paths = [publish(b.path, request.out) for b in made]
    index = variant.write_index(request.out, ctx) if len(made) > 1 else None
    record_wheels(report, ctx, paths)
    return [*paths, *([index] if index else [])]


def second_build(
    ctx: Context,
    selection: PlanRequest,
    plan: Plan,
    *,
    verify: bool,
    others: Sequence[Context] = (),
) -> tuple[Callable[[], int], contextlib.AbstractContextManager[Rebuild | None]]:
    """The wheels' epoch (read once, shared by both builds of ``--verify``) and the block in
    which ``--verify``'s second build runs beside the first (:func:`rebuild.beside`); with
    ``others`` (more interpreters' contexts), it makes their wheels too."""
    from builder.pipeline import rebuild

    epoch = epoch_once(ctx, plan)
    maker = _inputs_maker(epoch)
    return epoch, rebuild.beside(ctx, selection, maker, enabled=verify, others=others)


def epoch_once(ctx: Context, plan: Plan) -> Callable[[], int]:
    """:func:`epoch_for`, read once and then remembered: both wheels of ``--verify`` take the
    same epoch whenever each asks for it (before or after the first build)."""
    return functools.cache(lambda: epoch_for(ctx, plan))


def _inputs_maker(epoch: Callable[[], int]) -> Callable[[Context, Plan], WheelInputs]:
    """How ``--verify``'s second build (beside the first) makes its wheel's inputs: as the
    first does, with the first's epoch (the fresh home's sources are the same commits)."""

    def inputs_for(again: Context, fresh: Plan) -> WheelInputs:
        return wheel_inputs(again, fresh, epoch())

    return inputs_for


def record_wheels(report: RunReport, ctx: Context, wheels: list[Path]) -> None:
    """The run report names the wheels the run wrote (``report --html`` audits them)."""
    from builder.engine import report as run_report

    report.wheels = [str(p.resolve()) for p in wheels]
    run_report.write(report, ctx.layout)


def wheel_selection(ctx: Context, request: PlanRequest) -> PlanRequest:
    """What the wheel is made of: its component and the bundled ones (unless the request
    names components)."""
    return dataclasses.replace(request, components=request.components or wheel_components(ctx))


def supplied_libraries(vendor: str) -> dict[str, DistLib]:
    return dict(load_vendor_policy(vendor).distributions)


def epoch_for(ctx: Context, plan: Plan) -> int:
    """SOURCE_DATE_EPOCH, else the newest commit time of the wheel's pinned sources."""
    times = []
    if not os.environ.get("SOURCE_DATE_EPOCH"):
        for c in plan.components:
            cache = ctx.layout.git_cache(c.source.url) if isinstance(c.source, GitSource) else None
            times.append(commit_time(c.source, cache))
    return wheel_epoch(os.environ, times)


def wheel_inputs(ctx: Context, plan: Plan, epoch: int) -> WheelInputs:
    spec = ctx.stack.wheel
    assert spec is not None
    settings = ctx.stack.vendors[ctx.vendor].settings
    partners = abi_partners(ctx)
    local = partner_local(get_vendor(ctx.vendor).local_version(ctx.host, settings), partners)
    trees = [c.source for c in plan.components if isinstance(c.source, WorktreeSource)]
    local = worktree_local(local, any(t.dirty for t in trees) if trees else None)
    local = sanitized_local(local, plan.sanitize.label if plan.sanitize else None)
    return WheelInputs(
        spec=spec,
        name=wheel_name(spec.name, spec.version, local, python=ctx.host.python_version),
        partners=partners,
        prefixes={c.name: c.prefix for c in plan.components},
        supplied=supplied_libraries(ctx.vendor),
        epoch=epoch,
        generator=f"infini-stack {__version__}",
    )


def abi_partners(ctx: Context) -> dict[str, str]:
    """Distribution -> version, of each Python distribution preflight read that the vendor's
    libraries may bind C++ symbols from (torch, the linked providers' flash-attn): the wheel's
    Requires-Dist on each admits only that ABI, and its local version names torch's."""
    report = ctx.preflight
    if report is None:
        return {}
    from builder.providers.linked import load as load_linked

    config = ctx.stack.vendors[ctx.vendor]
    linked = {s.provider_name: s.distribution for p in config.linked for s in load_linked(p)}
    supplied = {lib.distribution for lib in load_vendor_policy(ctx.vendor).distributions.values()}
    found: dict[str, str] = {}
    for result in report.results:
        distribution = linked.get(result.name, result.name)
        if result.ok and result.version and distribution in supplied:
            found[distribution] = result.version
    return found


def assemble(ctx: Context, plan: Plan, dest: Path, *, epoch: int) -> Built:
    """Assemble the wheel (with its SBOM) into ``dest`` and audit it."""
    inputs = wheel_inputs(ctx, plan, epoch)
    requires: list[str] = []
    finish = sbom_finisher(plan, inputs)

    def remember(root: Path, found: list[str]) -> dict[str, bytes]:
        requires.extend(found)
        return dict(finish(root, found)) if finish else {}

    wheel = build_wheel(inputs, dest, remember)
    audit_built(ctx, wheel)
    return Built(path=wheel, inputs=inputs, requires=tuple(requires))


@contextlib.contextmanager
def pending_dir(ctx: Context) -> Iterator[Path]:
    pending = ctx.layout.home / "wheels"
    pending.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=pending) as tmp:
        yield Path(tmp)


def publish(wheel: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel.name
    shutil.move(str(wheel), target)
    return target


def audit_built(ctx: Context, wheel: Path) -> None:
    """The audit of a wheel this stack built: its device code against the whole architecture
    set, its size against wheel.max_size (or --max-size, :func:`with_max_size`)."""
    spec = ctx.stack.wheel
    max_size = spec.max_size if spec is not None else None
    audit_or_keep(wheel, ctx.vendor, ctx.layout.home / "wheels", cuda_architectures(ctx), max_size)


def with_max_size(ctx: Context, max_size: int | None) -> Context:
    """``ctx`` whose wheel.max_size is ``max_size`` (--max-size), where one is given."""
    spec = ctx.stack.wheel
    if max_size is None or spec is None:
        return ctx
    stack = dataclasses.replace(ctx.stack, wheel=dataclasses.replace(spec, max_size=max_size))
    return dataclasses.replace(ctx, stack=stack)


def cuda_architectures(ctx: Context) -> tuple[str, ...]:
    """The whole set every library was built for (stack.yaml's, else the vendor's own), which
    the audit holds the wheel's device code to: each must have SASS or PTX in every ELF."""
    return get_vendor(ctx.vendor).architectures(ctx.stack.vendors[ctx.vendor].settings)


# --- --verify -----------------------------------------------------------------------------------


def verify_rebuild(
    ctx: Context, selection: PlanRequest, plan: Plan, built: Built, work: Path
) -> Path:
    """Build stack and wheel again under a fresh home; raise unless the wheels are identical."""
    from builder.engine.store import Store
    from builder.pipeline.reproduce import built_under, fresh_layout, require_identical

    spec = ctx.stack.wheel
    assert spec is not None
    first = Store(ctx.layout).record(plan.get(spec.component).key)
    with fresh_layout(ctx.layout, built_under(first)) as layout:
        mirrors = dict(ctx.mirrors)
        for c in ctx.stack.components.values():  # the second build fetches from our caches
            source = c.source_for(ctx.vendor)
            if isinstance(source, GitSource) and ctx.layout.git_cache(source.url).exists():
                mirrors[source.url] = str(ctx.layout.git_cache(source.url))
        again = dataclasses.replace(ctx, layout=layout, mirrors=mirrors)
        fresh = plan_for(again, selection)
        print(f"verify: building again under {layout.home}", file=sys.stderr)
        build_plan(again, fresh, launcher=None, command="wheel-verify")
        inputs = wheel_inputs(again, fresh, built.inputs.epoch)
        second = build_wheel(inputs, work, sbom_finisher(fresh, inputs))
    require_identical(built.path, second)
    print(f"verify: {built.path.name}: two builds are byte-identical", file=sys.stderr)
    return second


# --- --repair -----------------------------------------------------------------------------------


def repair_and_audit(ctx: Context, plan: Plan, built: Built, work: Path) -> Built:
    """auditwheel repair (excluding what the vendor supplies), packed again by us, audited."""
    from wheels import repair
    from wheels.policy import load_vendor_policy

    policy = load_vendor_policy(ctx.vendor)
    exclude = repair.never_graft(policy.external, policy.distributions)
    repaired = repair.repair(built.path, work / "auditwheel", exclude, epoch=built.inputs.epoch)
    root = work / "root"
    root.mkdir(parents=True)
    repair.unpack_payload(repaired, root)
    name = dataclasses.replace(built.inputs.name, platform_tag=repair.platform_tag(repaired))
    inputs = dataclasses.replace(built.inputs, name=name, extra_files=None)
    finish = sbom_finisher(plan, inputs)
    if finish is not None:
        inputs = dataclasses.replace(inputs, extra_files=finish(root, list(built.requires)))
    out = work / "wheel"
    out.mkdir()
    wheel = pack(root, inputs, list(built.requires), out / inputs.name.filename)
    audit_built(ctx, wheel)
    return Built(path=wheel, inputs=inputs, requires=built.requires)


# --- the SBOM of the stack as built -------------------------------------------------------------


def built_sbom(stack: StackRequest, selection: PlanRequest) -> str:
    """The CycloneDX SBOM the vendor's wheel would carry, of what the store holds now."""
    from builder.engine.store import Store
    from builder.pipeline import sbom
    from wheels.assemble import stage

    sbom.require()
    ctx = open_context(stack)
    plan = plan_for(ctx, wheel_selection(ctx, selection))
    store = Store(ctx.layout)
    missing = [c.name for c in plan.components if not store.has(c.key)]
    if missing:
        raise UsageError(
            f"not built for {ctx.vendor}: {', '.join(missing)} (an SBOM describes the stack "
            "as built)",
            hint=f"run `infini-stack build --vendor {ctx.vendor}` (or `wheel`) first",
        )
    inputs = wheel_inputs(ctx, plan, epoch_for(ctx, plan))
    with tempfile.TemporaryDirectory(prefix="infini-sbom-") as tmp:
        root = Path(tmp)
        requires = stage(inputs, root)  # exactly what the wheel would carry
        return sbom.document(plan, inputs, root, requires)


# --- the epoch ----------------------------------------------------------------------------------


def commit_time(source: Source, git_dir: Path | None) -> int | None:
    """A git pin's committer time (from ``git_dir``, the bare cache); for a path source inside a
    git work tree, the committer time of the last commit touching it; otherwise None."""
    if proc.which("git") is None:
        return None
    if isinstance(source, GitSource):
        if git_dir is None or not git_dir.exists():
            return None
        argv = ["git", "--git-dir", str(git_dir), "log", "-1", "--format=%ct", source.rev]
        cwd = None
    else:
        if not source.path.is_dir():
            return None
        argv = ["git", "log", "-1", "--format=%ct", "--", "."]
        cwd = source.path
    result = proc.run(argv, cwd=cwd, check=False, timeout=60, env={**os.environ, "LC_ALL": "C"})
    # The last line: git may warn before it on the same (combined) output.
    lines = result.output.strip().splitlines()
    text = lines[-1].strip() if lines else ""
    return int(text) if result.returncode == 0 and text.isdigit() else None
