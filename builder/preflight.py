"""Preflight: can this host build (or run) a vendor's stack? Known in seconds, before any compile.

Runs the vendor's providers (independent probes concurrently) against the manifest's
constraints (``vendors.<v>.providers``), for the selected components, and returns a
:class:`PreflightReport`: a table for people, JSON for machines, the fingerprints that go into
every cache key (``HostFacts.providers``) and the CMake hints the vendors pass on
(``HostFacts.hints``). :func:`require` raises :class:`PreflightError` (exit 3) naming every
failing provider and what to install or set.
"""

from __future__ import annotations

import difflib
import json
import os
import platform
import sys
import sysconfig
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from builder.core import proc, termwrap
from builder.core.errors import ManifestError, PreflightError, StackError
from builder.core.fs import atomic_write
from builder.core.host import HostFacts, Toolkit
from builder.core.layout import Layout
from builder.manifest.model import TARGET, GitSource, Stack
from builder.providers import linked as linked_providers
from builder.providers import search
from builder.providers.libs import STANDARD_INCLUDES, toolkit_root
from builder.providers.probe import (
    ComponentNeeds,
    ProbeContext,
    Provider,
    ProviderResult,
    Purpose,
    PythonFacts,
    Selection,
    evaluate,
    needed_by,
    not_checked,
)
from builder.vendors import get as get_vendor

TOOLKITS = ("cuda", "musa", "ppu-sdk")  # the provider that is the vendor's toolkit, if any


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    vendor: str
    purpose: Purpose
    manifest: str
    python: str
    components: tuple[str, ...]
    results: tuple[ProviderResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> tuple[ProviderResult, ...]:
        return tuple(r for r in self.results if r.failed)

    def get(self, name: str) -> ProviderResult | None:
        return next((r for r in self.results if r.name == name), None)

    def fingerprints(self, component: str | None = None) -> dict[str, str]:
        """name -> ``version@path`` of the providers a build's output depends on (all the
        selected components', or one component's); run-time-only and unkeyed ones excluded."""
        return {
            r.name: r.fingerprint()
            for r in self.results
            if r.ok
            and r.keyed
            and "build" in r.needed_for
            and (component is None or component in r.components)
        }

    def hints(self, component: str | None = None) -> dict[str, str]:
        """CMake cache variables that make the build take exactly what was found (for all the
        selected components, or for one)."""
        merged: dict[str, str] = {}
        for result in self.results:
            if not result.ok or (component is not None and component not in result.components):
                continue
            for key, value in result.defines.items():
                if key in STANDARD_INCLUDES and key in merged:
                    parts = merged[key].split(";")
                    merged[key] = ";".join([*parts, value] if value not in parts else parts)
                else:
                    merged.setdefault(key, value)
        return merged

    def toolkit(self) -> Toolkit | None:
        results = {r.name: r for r in self.results}
        for name in TOOLKITS:
            root = toolkit_root(results, name)
            if root is not None:
                result = results[name]
                return Toolkit(
                    root=root,
                    compiler=Path(str(result.path)),  # set: toolkit_root found it
                    version=result.version,
                    found=True,
                    source=result.origin or "",
                )
        return None

    def apply_to(self, host: HostFacts) -> HostFacts:
        """``host`` with these fingerprints, hints and toolkit: what planning should see."""
        return replace(
            host,
            providers=self.fingerprints(),
            hints=self.hints(),
            component_providers={c: self.fingerprints(c) for c in self.components},
            component_hints={c: self.hints(c) for c in self.components},
            toolkit=self.toolkit() or host.toolkit,
        )

    def failures_for(self, components: Sequence[str]) -> tuple[ProviderResult, ...]:
        """The failures that matter to ``components`` (all failures when it is empty)."""
        if not components:
            return self.failures
        wanted = set(components)
        return tuple(r for r in self.failures if not r.components or wanted & set(r.components))

    def error(self, failures: Sequence[ProviderResult] | None = None) -> PreflightError:
        failures = self.failures if failures is None else failures
        lines = [
            f"preflight for {self.vendor} ({self.purpose}): {len(failures)} required "
            f"provider(s) failed:"
        ]
        for r in failures:
            found = f" (found {r.version or '?'} at {r.path})" if r.path else ""
            wanted = f", wanted {r.wanted}" if r.wanted else ""
            lines.append(f"  {r.name}: {r.status}{wanted}{found}")
            lines.extend(f"    {d}" for d in r.details[:3])
            if r.hint:
                lines.append(f"    hint: {r.hint}")
        return PreflightError(
            "\n".join(lines),
            hint=f"install or set what the hints say, or change vendors.{self.vendor}.providers "
            f"in {self.manifest}; `infini-stack preflight --vendor {self.vendor}` shows all",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "vendor": self.vendor,
            "purpose": self.purpose,
            "manifest": self.manifest,
            "python": self.python,
            "components": list(self.components),
            "ok": self.ok,
            "failed": [r.name for r in self.failures],
            "seconds": round(self.seconds, 3),
            "providers": [r.to_json() for r in self.results],
            "fingerprints": self.fingerprints(),
            "hints": self.hints(),
        }

    def table(self, width: int | None = None) -> str:
        return render_table(self, width)


# -- what the selection needs ----------------------------------------------------------------------


def selection(
    stack: Stack, vendor: str, components: Sequence[str] = (), *, wheel: bool = False
) -> Selection:
    names = stack.selected(vendor, tuple(components))
    # The wheel's component is the one whose install tree holds the Python packages, i.e. the
    # one building pybind11 extensions. A ``python: tool`` build runs the tool's own interpreter,
    # which is here by definition: it asks nothing of the target interpreter.
    extension = stack.wheel.component if stack.wheel is not None else None
    targets = {
        n for n in stack.components if stack.components[n].recipe.python_for(vendor) == TARGET
    }
    return Selection(
        components={
            name: ComponentNeeds(
                options=stack.components[name].options_for(vendor),
                python=name in targets,
                extension=name in targets and name == extension,
                git=isinstance(stack.components[name].source_for(vendor), GitSource),
                provided=frozenset(stack.components[name].recipe.dependency_vars_for(vendor)),
                toolkit=vendor not in stack.components[name].recipe.without_toolkit,
            )
            for name in names
        },
        wheel=wheel and stack.wheel is not None,
    )


def constraints(
    stack: Stack,
    vendor: str,
    providers: Sequence[Provider],
    linked: Sequence[linked_providers.LinkedSpec] = (),
) -> dict[str, str]:
    """The manifest's specifiers (and the linked ones); an unknown provider name is an error."""
    declared = dict(stack.vendors[vendor].providers)
    known = [p.name for p in providers]
    problems = []
    for name in declared:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            tip = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(known)})"
            problems.append(
                f"{stack.label}: vendors.{vendor}.providers.{name}: '{name}' is not "
                f"a provider of vendor {vendor}{tip}"
            )
    if problems:
        raise ManifestError(problems)
    if "python" not in declared and stack.wheel is not None:
        declared["python"] = stack.wheel.requires_python
    declared.update(linked_providers.constraints(tuple(linked)))
    return declared


# -- the target interpreter ------------------------------------------------------------------------

_PYTHON_FACTS = (
    "import json, platform, sys, sysconfig; p = sysconfig.get_paths(); "
    "print(json.dumps({'version': platform.python_version(), 'include': p.get('include'), "
    "'path': sys.path, 'scripts': p.get('scripts'), "
    "'soabi': sysconfig.get_config_var('SOABI') or ''}))"
)


def python_facts(python: str | None, env: Mapping[str, str]) -> PythonFacts:
    """Facts about the interpreter the stack is built for: this one in-process, else asked."""
    if python is None or Path(python).absolute() == Path(sys.executable).absolute():
        paths = sysconfig.get_paths()
        data: dict[str, Any] = {
            "version": platform.python_version(),
            "path": sys.path,
            "include": paths.get("include"),
            "scripts": paths.get("scripts"),
            "soabi": sysconfig.get_config_var("SOABI") or "",
        }
    else:
        try:
            result = proc.run([python, "-c", _PYTHON_FACTS], env=env, timeout=30, check=False)
            data = json.loads(result.output.strip().splitlines()[-1])
        except (StackError, ValueError, IndexError):
            data = {"version": "", "path": [], "include": None, "scripts": None, "soabi": ""}
    site_dirs = tuple(
        Path(p) for p in data["path"] if p and Path(p).is_absolute() and Path(p).is_dir()
    )
    return PythonFacts(
        executable=python or sys.executable,
        version=str(data["version"]),
        include=Path(data["include"]) if data.get("include") else None,
        site_dirs=site_dirs,
        scripts=Path(data["scripts"]) if data.get("scripts") else None,
        soabi=str(data.get("soabi", "")),
        dists=search.index_distributions(site_dirs),
    )


# -- running the probes ----------------------------------------------------------------------------


def run_providers(providers: Sequence[Provider], ctx: ProbeContext) -> tuple[ProviderResult, ...]:
    """Every provider, independent ones concurrently; a probe waits only for those it reads."""
    declared = {p.name for p in providers}
    missing = [d for p in providers for d in p.requires if d not in declared]
    assert not missing, f"providers require undeclared providers: {missing}"
    futures: dict[str, Future[ProviderResult]] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(providers))) as pool:
        for provider in providers:  # declaration order: what a probe waits for comes first
            waits = {d: futures[d] for d in (*provider.after, *provider.requires) if d in futures}
            futures[provider.name] = pool.submit(_one, provider, ctx, waits)
    return tuple(futures[p.name].result() for p in providers)


def _by(needs: str) -> str:
    """``by NAMES``, or ``with OPTION ON`` alone where a rule names only an option."""
    return needs if needs.startswith("with ") else f"by {needs}"


def _one(
    provider: Provider, ctx: ProbeContext, waits: Mapping[str, Future[ProviderResult]]
) -> ProviderResult:
    deps = {name: future.result() for name, future in waits.items()}
    components = needed_by(provider.rules, ctx.selection)
    wanted = ctx.constraints.get(provider.name, "")
    if not components:
        needs = " or ".join(r.describe() for r in provider.rules)
        return not_checked(provider, f"needed only {_by(needs)}", wanted=wanted)
    if ctx.purpose not in provider.needed_for and ctx.purpose == "run":
        return not_checked(provider, "needed only to build", components=components, wanted=wanted)
    for name in provider.requires:
        dep = deps.get(name)
        if dep is not None and not dep.ok:
            return not_checked(
                provider,
                f"needs {name}, which is {dep.status}",
                components=components,
                wanted=wanted,
            )
    return evaluate(provider, ctx, deps, purpose=ctx.purpose, components=components)


def declared_linked(stack: Stack, vendor: str) -> tuple[linked_providers.LinkedSpec, ...]:
    """The linked providers the manifest's files declare for ``vendor`` (``vendors.V.linked``)."""
    config = stack.vendors.get(vendor)
    files = config.linked if config is not None else ()
    return tuple(spec for file in files for spec in linked_providers.load(file))


def check(
    stack: Stack,
    vendor: str,
    host: HostFacts,
    components: Sequence[str] = (),
    *,
    purpose: Purpose = "build",
    linked: Sequence[linked_providers.LinkedSpec] = (),
    wheel: bool = False,
    cache: Path | None = None,
) -> PreflightReport:
    """Probe every provider the vendor declares for ``components`` (all when empty);
    ``cache``: where probes keep what they found, keyed by the programs' files.

    ``linked`` adds linked providers to those the manifest declares for the vendor (a name
    given in both is the one from ``linked``).
    """
    start = time.monotonic()
    linked = tuple({s.name: s for s in (*declared_linked(stack, vendor), *linked)}.values())
    providers = (*get_vendor(vendor).providers(), *(linked_providers.provider(s) for s in linked))
    wanted = constraints(stack, vendor, providers, linked)
    chosen = selection(stack, vendor, components, wheel=wheel)
    env = host.env or os.environ
    ctx = ProbeContext(
        env=env,
        python=python_facts(host.python, env),
        cxx=host.cxx,
        selection=chosen,
        purpose=purpose,
        cuda_architectures=get_vendor(vendor).architectures(stack.vendors[vendor].settings),
        constraints=wanted,
        tool_scripts=_tool_scripts(),
        shared_cxx_runtime=stack.cxx_runtime == "shared",
        places=get_vendor(vendor).places,
        cache=cache,
    )
    results = run_providers(providers, ctx)
    return PreflightReport(
        vendor=vendor,
        purpose=purpose,
        manifest=stack.label,
        python=ctx.python.executable,
        components=tuple(chosen.components),
        results=results,
        seconds=time.monotonic() - start,
    )


def require(
    stack: Stack,
    vendor: str,
    host: HostFacts,
    components: Sequence[str] = (),
    *,
    purpose: Purpose = "build",
    linked: Sequence[linked_providers.LinkedSpec] = (),
    wheel: bool = False,
) -> PreflightReport:
    """:func:`check`, raising :class:`PreflightError` (exit 3) when a required provider fails."""
    report = check(stack, vendor, host, components, purpose=purpose, linked=linked, wheel=wheel)
    if not report.ok:
        raise report.error()
    return report


def _tool_scripts() -> Path | None:
    scripts = sysconfig.get_paths().get("scripts")
    return Path(scripts) if scripts else None


def record(report: PreflightReport, layout: Layout) -> Path:
    """Keep the latest report per vendor and purpose (for people and run reports; never read
    back as a cache: every preflight probes afresh)."""
    path = layout.home / "preflight" / f"{report.vendor}-{report.purpose}.json"
    return atomic_write(path, json.dumps(report.to_json(), indent=2) + "\n")


# -- the table -------------------------------------------------------------------------------------

COLUMNS = ("provider", "wanted", "found", "where", "status", "hint")


def render_table(report: PreflightReport, width: int | None = None) -> str:
    """One row per checked provider (details indented below it); unchecked ones summed up.

    ``width`` (a terminal's): when the table is wider, each provider gets a line of its own
    (name, status, what was found) with where it was found, what was wanted, the hint and the
    details below it, every line wrapped to ``width``. ``None``: whole lines, the table."""
    rows = [COLUMNS]
    notes: dict[int, tuple[str, ...]] = {}
    skipped: dict[str, list[str]] = {}
    for result in report.results:
        if result.status == "not checked":
            skipped.setdefault(result.details[0] if result.details else "", []).append(result.name)
            continue
        rows.append(_row(result))
        notes[len(rows) - 1] = result.details
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = [
        f"preflight for {report.vendor} ({report.purpose}) from {report.manifest}; "
        f"target python {report.python}"
    ]
    table = []
    for index, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) for i in range(len(widths))]
        table.append("  ".join([*cells, row[-1]]).rstrip())
        table.extend(f"    - {d}" for d in notes.get(index, ()))
    if width is None or max(len(line) for line in table) <= width:
        lines += table
    else:
        lines += _stacked(rows[1:], [notes.get(i, ()) for i in range(1, len(rows))])
    lines.extend(f"not checked: {', '.join(names)} ({why})" for why, names in skipped.items())
    verdict = "ok" if report.ok else f"FAILED: {', '.join(r.name for r in report.failures)}"
    lines.append(f"{report.vendor} ({report.purpose}): {verdict} ({report.seconds:.2f}s)")
    return termwrap.fit("\n".join(lines), width)


def _stacked(
    rows: Sequence[tuple[str, str, str, str, str, str]], notes: Sequence[tuple[str, ...]]
) -> list[str]:
    """The table's rows for a narrow terminal: a head line per provider, the rest below it."""
    name_width = max((len(row[0]) for row in rows), default=0)
    lines = []
    for (name, wanted, found, where, status, hint), details in zip(rows, notes, strict=True):
        lines.append(f"{name.ljust(name_width)}  {status}  {found}".rstrip())
        lines += [f"    at {where}"] if where != "-" else []
        lines += [f"    wanted {wanted}"] if wanted != "-" else []
        lines += [f"    hint: {hint}"] if hint else []
        lines += [f"    - {d}" for d in details]
    return lines


def _row(result: ProviderResult) -> tuple[str, str, str, str, str, str]:
    found = result.version or ("yes" if result.ok else "-")
    if result.version and result.version_source:
        found = f"{result.version} ({result.version_source})"
    where = f"{result.path} [{result.origin}]" if result.path else "-"
    hint = result.hint if result.status != "found" and result.hint else ""
    return (result.name, result.wanted or "-", found, where, result.status, hint)
