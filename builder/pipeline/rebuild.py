"""``--verify``'s second build, run beside the first rather than after it.

A cold release builds the stack twice: once for the wheel, once under a fresh home to prove the
wheel reproducible. The second build needs nothing from the first but the fetched sources and the
lengths of its paths, both known before the first compile, so it runs in a child process of its
own while the first one builds. The two are still independent builds from the same inputs: the
child gets its own home and store (paths as long as the first build's), its own build
directories and source checkouts, and no compiler launcher; only the git caches are shared, as
the sequential proof shares them. Much of a stack's build is serial (CMake's configure, code
generators, the final links), so the two overlap well even on a loaded machine. The child runs
at a lower CPU priority (``NICE``): the first build, which the smoke test and the runtime check
wait for, gets the cores it can use, and the second takes the rest, then all of them while the
wheel is checked (a release proves reproducibility after its check).

When the wheel's component is already in the store, the first build costs nothing and the
second is the release's long pole: it starts all the same, under a home and store as long as
those the entry was built under (its store record says), and the wheel's audit, the smoke test
and the runtime check run beside it. The proof itself is the same either way.

The child is ``python -m builder.pipeline.rebuild JOB``: ``JOB`` is a pickle of what it builds,
and it writes ``result.json`` (the second wheel, or the error and its exit code) beside it; its
progress goes to ``verify.log``, whose tail a failure shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import BuildError, StackError
from builder.core.layout import Layout
from builder.manifest.model import GitSource
from builder.pipeline.context import Context, plan_for
from builder.pipeline.requests import PlanRequest
from builder.plan import Plan
from wheels.assemble import WheelInputs

JOB = "job.pickle"
RESULT = "result.json"
LOG = "verify.log"
TAIL = 40  # lines of the child's log a failure shows
NICE = 10  # the second build's CPU priority below the first's (os.nice increment)
# INFINI_STACK_VERIFY=after: the second build runs after the first, as on a warm store
# (benchmarks/verify_overlap.py times the two orders against each other).
ORDER_VAR = "INFINI_STACK_VERIFY"


@dataclass(frozen=True)
class Job:
    """What the child builds: the context under its fresh home, the selection, the epoch."""

    ctx: Context
    selection: PlanRequest
    inputs: WheelInputs  # the wheel's, as the caller made them for the fresh plan
    out: Path
    # The other interpreters' contexts under the same fresh home, and their wheels' inputs:
    # one build of the union of their plans makes every wheel.
    others: tuple[tuple[Context, WheelInputs], ...] = ()


@dataclass
class Rebuild:
    """A second build under way in a child process."""

    process: subprocess.Popen[bytes]
    home: Path
    started: float
    log: Path

    def finish(self, first: Path, keep_in: Path) -> Path:
        """Wait for the child; the second wheel (copied into ``keep_in``), compared with
        ``first`` (raises ReproducibilityError when they differ)."""
        return self.finish_all([first], keep_in)[0]

    def finish_all(self, firsts: list[Path], keep_in: Path) -> list[Path]:
        """:meth:`finish` for every interpreter's wheel, in the order the job named them."""
        self.process.wait()
        result = self._result()
        if "error" in result:
            error = BuildError(
                f"the second build of --verify failed: {result['error']}\n" + _tail(self.log),
                hint=f"its log: {self.log}",
            )
            error.exit_code = int(str(result.get("exit_code", BuildError.exit_code)))
            raise error
        made = result["wheels"]
        assert isinstance(made, list)
        seconds = f"took {result['seconds']:.1f}s; {result.get('built', '')}"
        return [
            _compared(f, Path(str(m)), keep_in, seconds) for f, m in zip(firsts, made, strict=True)
        ]

    def _result(self) -> dict[str, object]:
        target = self.home / RESULT
        if not target.is_file():
            return {
                "error": f"it exited with status {self.process.returncode} and said nothing",
                "exit_code": BuildError.exit_code,
            }
        data: dict[str, object] = json.loads(target.read_text(encoding="utf-8"))
        return data


def _compared(first: Path, made: Path, keep_in: Path, seconds: str) -> Path:
    """The second build's ``made`` copied into ``keep_in``, compared with ``first``."""
    from builder.pipeline.reproduce import require_identical

    keep_in.mkdir(parents=True, exist_ok=True)
    second = keep_in / made.name
    shutil.copyfile(made, second)
    require_identical(first, second)
    print(
        f"verify: {first.name}: two builds are byte-identical (the second, started with the "
        f"first, {seconds})",
        file=sys.stderr,
    )
    return second


@contextlib.contextmanager
def beside(
    ctx: Context,
    selection: PlanRequest,
    inputs_for: Callable[[Context, Plan], WheelInputs],
    *,
    enabled: bool,
    others: Sequence[Context] = (),
) -> Iterator[Rebuild | None]:
    """The second build started now, in a child, when ``enabled``; None otherwise (the caller
    proves it afterwards). A store hit's second build matches the path lengths it was built
    under (as :func:`builder.pipeline.wheel.verify_rebuild` does). ``inputs_for(ctx,
    plan)`` gives the wheel's inputs of the fresh plan, once the sources are fetched (the epoch
    reads their commit times). The child is stopped and its home removed when the block ends."""
    from builder.engine.store import Store
    from builder.pipeline.build import fetch_sources
    from builder.pipeline.reproduce import built_under, fresh_layout

    spec = ctx.stack.wheel
    enabled = enabled and os.environ.get(ORDER_VAR, "beside") != "after"
    plan = plan_for(ctx, selection) if enabled and spec is not None else None
    if plan is None or spec is None:
        yield None
        return
    store, key = Store(ctx.layout), plan.get(spec.component).key
    like = built_under(store.record(key)) if store.has(key) else None
    fetch_sources(ctx, plan)  # the caches the child fetches from, and the epoch's commit times
    with fresh_layout(ctx.layout, like) as layout:
        again = _again(ctx, plan, layout)
        inputs = inputs_for(again, plan_for(again, selection))
        more = [_again(other, plan, layout) for other in others]
        job = Job(
            ctx=again,
            selection=selection,
            inputs=inputs,
            out=layout.home / "wheel",
            others=tuple((c, inputs_for(c, plan_for(c, selection))) for c in more),
        )
        rebuild = _start(job, layout.home)
        try:
            yield rebuild
        finally:
            if rebuild.process.poll() is None:
                rebuild.process.terminate()
                rebuild.process.wait()


def _again(ctx: Context, plan: Plan, layout: Layout) -> Context:
    """``ctx`` under the fresh layout, fetching from this build's git caches."""
    mirrors = dict(ctx.mirrors)
    for c in plan.components:
        if isinstance(c.source, GitSource) and ctx.layout.git_cache(c.source.url).exists():
            mirrors[c.source.url] = str(ctx.layout.git_cache(c.source.url))
    return dataclasses.replace(ctx, layout=layout, mirrors=mirrors)


def _start(job: Job, home: Path) -> Rebuild:
    (home / JOB).write_bytes(pickle.dumps(job))
    log = home / LOG
    root = str(Path(__file__).resolve().parents[2])  # where the builder package is imported from
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    print(f"verify: building again under {home}, beside the first build", file=sys.stderr)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "builder.pipeline.rebuild", str(home / JOB)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    return Rebuild(process=process, home=home, started=time.monotonic(), log=log)


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in lines[-TAIL:])


# --- the child ------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """Build the job's stack and wheel; write the result beside the job."""
    from builder.engine.report import totals_text
    from builder.pipeline.build import build_plan
    from builder.pipeline.built import sbom_finisher
    from builder.plan_interpreters import union_plan
    from wheels.assemble import build_wheel

    with contextlib.suppress(OSError):
        os.nice(NICE)  # inherited by CMake, Ninja and the compilers
    path = Path(argv[0])
    job: Job = pickle.loads(path.read_bytes())
    result = path.parent / RESULT
    start = time.monotonic()
    try:
        wanted = [(job.ctx, job.inputs), *job.others]
        plans = {c.host.python_tag: plan_for(c, job.selection) for c, _ in wanted}
        plan = union_plan(plans) if job.others else plans[job.ctx.host.python_tag]
        report = build_plan(job.ctx, plan, launcher=None, command="wheel-verify")
        wheels = []
        for ctx, inputs in wanted:
            out = job.out / (ctx.host.python_tag or "wheel")
            out.mkdir(parents=True, exist_ok=True)
            finish = sbom_finisher(plans[ctx.host.python_tag], inputs)
            wheels.append(str(build_wheel(inputs, out, finish)))
    except StackError as exc:
        print(exc.render(), file=sys.stderr)
        data = {"error": exc.message, "exit_code": exc.exit_code}
        result.write_text(json.dumps(data), encoding="utf-8")
        return exc.exit_code
    data = {
        "wheels": wheels,
        "seconds": round(time.monotonic() - start, 3),
        "built": totals_text(report.to_json()),
    }
    result.write_text(json.dumps(data), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
