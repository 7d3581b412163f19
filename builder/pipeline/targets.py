"""The interpreters a release makes wheels for: ``release --python`` (or stack.yaml's
``wheel.pythons``), each found, each preflighted as the target interpreter (headers, pybind11
for it), each with the context its plan, wheel, smoke test and check run in.

Without either, a release has one target: the interpreter the tool runs under, in the context
the command opened, exactly as before. With them, each target's host carries its interpreter's
tag (cp312): its Python components are keyed by that interpreter and built in their own
directories, and :mod:`builder.plan_interpreters` builds the shared components once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core import proc
from builder.core.errors import PreflightError, UsageError
from builder.engine.suite import RUNNER_REQUIREMENTS
from builder.manifest.model import TARGET
from builder.pipeline.context import Context, require_preflight
from builder.providers.interpreters import Interpreter, find_all

if TYPE_CHECKING:
    from builder.checks.requirements import Unmet
    from builder.plan import Plan


@dataclass(frozen=True, kw_only=True)
class Target:
    """One interpreter's wheel: the context it is planned, packaged and checked in."""

    ctx: Context
    interpreter: Interpreter | None = None  # None: the tool's own interpreter, one wheel
    unmet: tuple[Unmet, ...] = ()  # its wheel's runtime requirements it lacks (no check there)

    @property
    def tag(self) -> str:
        """``cp312``; empty for the one target of a release without ``--python``."""
        return self.ctx.host.python_tag

    @property
    def python(self) -> str:
        return self.ctx.host.python

    def stage(self, name: str) -> str:
        """The name of one of its release stages: ``smoke cp312`` (``smoke`` when alone)."""
        return f"{name} {self.tag}" if self.tag else name


def requested(ctx: Context, given: Sequence[str]) -> tuple[str, ...]:
    """``--python`` as given, else stack.yaml's ``wheel.pythons``; empty: the tool's own."""
    spec = ctx.stack.wheel
    return tuple(given) or (spec.pythons if spec is not None else ())


def resolve(ctx: Context, requests: Sequence[str]) -> tuple[Target, ...]:
    """One target per interpreter asked for (found, in range, preflighted), in the order given;
    the tool's own interpreter alone when none is asked for."""
    if not requests:
        return (Target(ctx=ctx),)
    interpreters = find_all(requests, ctx.host.env or None)
    for interpreter in interpreters:
        in_range(ctx, interpreter)
    return tuple(Target(ctx=for_interpreter(ctx, i), interpreter=i) for i in interpreters)


def in_range(ctx: Context, interpreter: Interpreter) -> None:
    spec = ctx.stack.wheel
    allowed = SpecifierSet(spec.requires_python) if spec is not None else SpecifierSet()
    if Version(interpreter.version) not in allowed:
        raise UsageError(
            f"Python {interpreter.version} ({interpreter.executable}) is outside the wheel's "
            f"requires_python '{allowed}'",
            hint=f"see wheel.requires_python in {ctx.stack.label}",
        )


def for_interpreter(ctx: Context, interpreter: Interpreter) -> Context:
    """``ctx`` with ``interpreter`` as the target: the tool's own keeps the host as probed (its
    keys are those of a release without --python); another is preflighted as the target."""
    from builder import preflight

    tag = interpreter.tag
    if _same(interpreter.executable, ctx.host.python):
        return dataclasses.replace(ctx, host=dataclasses.replace(ctx.host, python_tag=tag))
    base = dataclasses.replace(
        ctx.host,
        python=interpreter.executable,
        python_version=interpreter.major_minor,
        soabi=interpreter.soabi,
        python_tag=tag,
        tool_python=ctx.host.tool(),  # ``python: tool`` builds keep running this one
    )
    report = preflight.check(ctx.stack, ctx.vendor, base, wheel=True, cache=ctx.layout.cache())
    pybind11 = report.get("pybind11")
    found = pybind11 is not None and pybind11.ok and pybind11.path
    host = dataclasses.replace(
        report.apply_to(base),
        pybind11_dir=str(pybind11.path) if found and pybind11 else None,
        pybind11_version=pybind11.version if found and pybind11 else None,
    )
    return dataclasses.replace(ctx, host=host, preflight=report)


def _same(a: str, b: str) -> bool:
    return Path(a).absolute() == Path(b).absolute()


def require(target: Target, components: tuple[str, ...]) -> None:
    """Every provider the wheel needs, for this target's interpreter (naming it when there
    are several), and pytest there where a component built for it runs its own suite."""
    try:
        require_preflight(target.ctx, components, wheel=True)
        require_suite_runner(target, components)
    except PreflightError as exc:
        if target.interpreter is not None:
            exc.message = f"for Python {target.interpreter.version} ({target.python}): " + (
                exc.message
            )
        raise


def require_suite_runner(target: Target, components: tuple[str, ...]) -> None:
    """A component built for the target interpreter (``python: true``) runs its suite with
    that interpreter, after its compile: pytest must be there before the first compile."""
    stack, vendor = target.ctx.stack, target.ctx.vendor
    suites = [
        name
        for name in components
        if stack.components[name].recipe.python_for(vendor) == TARGET
        and (test := stack.components[name].recipe.test_for(vendor)) is not None
        and test.suite is not None
    ]
    if not suites:
        return
    probe = proc.run([target.python, "-c", "import pytest, xdist"], check=False, timeout=60)
    if probe.returncode != 0:
        raise PreflightError(
            f"pytest and pytest-xdist are not both installed for {target.python}, which runs "
            f"the suite of {', '.join(suites)} after its build",
            hint=f"install them first: {target.python} -m pip install {RUNNER_REQUIREMENTS}",
        )


def with_unmet(target: Target) -> Target:
    """``target`` with the wheel's runtime requirements its interpreter lacks."""
    from builder.checks.requirements import unmet

    spec = target.ctx.stack.wheel
    missing = unmet(spec.requires, target.python) if spec is not None else []
    return dataclasses.replace(target, unmet=tuple(missing))


def extension_tag(soabi_tag: str) -> str | None:
    """``cpython-312-x86_64-linux-gnu`` -> ``cp312``; None for abi3 (any CPython 3)."""
    parts = soabi_tag.split("-")
    if parts[0] == "cpython" and len(parts) > 1 and parts[1].isdigit():
        return f"cp{parts[1].rstrip('t')}"
    return None


def require_own_tag(wheel: Path) -> None:
    """Every extension module of ``wheel`` is built for the interpreter its tag names: a
    ``cp312`` wheel carries ``*.cpython-312-*.so`` (or ``abi3``) only, else exit 6."""
    import zipfile

    from builder.core.errors import AuditError
    from wheels.naming import extension_parts

    tag = wheel.name.removesuffix(".whl").split("-")[-3]
    wrong = []
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            parts = extension_parts(member.rsplit("/", 1)[-1])
            own = extension_tag(parts[1]) if parts else None
            if own is not None and own not in tag.split("."):
                wrong.append(f"{member} ({own})")
    if wrong:
        raise AuditError(
            f"{wheel.name} is tagged {tag} but carries extension modules built for another "
            f"interpreter: {', '.join(wrong)}"
        )


def one_length(found: Sequence[Target], plans: Mapping[str, Plan]) -> bool:
    """Whether every wheel's entry was (or is about to be) built under a home and store of one
    length each: then one second build, beside the first, reproduces every wheel. An installed
    RUNPATH keeps the length of the build tree's, so an entry from an earlier run under another
    home is reproduced only under a home as long as that one (its own second build, after)."""
    from builder.engine.store import Store
    from builder.pipeline.reproduce import built_under

    ctx = found[0].ctx
    spec = ctx.stack.wheel
    if spec is None:
        return True
    store = Store(ctx.layout)
    lengths = set()
    for target in found:
        key = plans[target.tag].get(spec.component).key
        like = built_under(store.record(key)) if store.has(key) else None
        home, root = like or (ctx.layout.home, ctx.layout.store_root)
        lengths.add((len(str(home)), len(str(root))))
    return len(lengths) == 1
