"""What a successful ``build`` leaves for the no-op fast path (:mod:`builder.noop`) to check.

The memo lists everything the build's plan was read from, so that a stat per file decides the
next identical build: the manifest and recipe files, recipe projects and path source trees,
this tool's own code, the compiler, the interpreter and pybind11, the files preflight found,
the directories on PATH, and the symlinks on the way to the manifest's paths. Files changed
within a second of the build that read them are not trusted (their timestamp might not tell a
later edit apart), and then no memo is left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from builder import noop
from builder.core.digest import SKIP_DIRS
from builder.core.host import HostFacts, compiler_path
from builder.core.layout import Layout
from builder.engine.report import ComponentResult, RunReport, summary_table
from builder.engine.store import RECORD
from builder.plan import Plan

RACY_NS = 1_000_000_000


def tree_paths(root: Path) -> list[str]:
    """``root``, its directories and its files as the source digest sees them."""
    out = [str(root)]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        out.extend(os.path.join(dirpath, d) for d in dirnames)  # noqa: PTH118
        out.extend(
            os.path.join(dirpath, f)  # noqa: PTH118
            for f in sorted(filenames)
            if not f.endswith(".pyc")
        )
    return out


def link_chain(path: Path) -> dict[str, str]:
    """Every symlink met while resolving ``path`` (lexically absolute), with its target."""
    links: dict[str, str] = {}
    todo = list(path.absolute().parts[1:])
    current = Path("/")
    hops = 0
    while todo and hops < 64:
        part = todo.pop(0)
        candidate = current.parent if part == ".." else current / part
        if candidate.is_symlink():
            target = candidate.readlink()
            links[str(candidate)] = str(target)
            hops += 1
            if target.is_absolute():
                todo = [*target.parts[1:], *todo]
                current = Path("/")
            else:
                todo = [*target.parts, *todo]
        else:
            current = candidate
    return links


def manifest_links(files: list[Path]) -> dict[str, str]:
    """Symlinks that paths written in these YAML files go through (a swapped link is a change)."""
    import yaml

    links: dict[str, str] = {}
    for file in files:
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        for text in _strings(data):
            candidate = file.parent / text
            if len(text) < 1024 and "\n" not in text and os.path.lexists(candidate):
                links.update(link_chain(candidate))
    return links


def _strings(data: object) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def planning_files(plan: Plan) -> list[str]:
    """Every file whose content planning ``plan`` depended on, and the directories holding them."""
    files = [str(plan.stack.file)]
    for c in plan.components:
        recipe = plan.stack.components[c.name].recipe
        files.append(str(recipe.file))
        if recipe.project is not None:
            files.extend(tree_paths(recipe.project))
        if c.incremental:
            files.extend(tree_paths(c.source_dir))
    files.extend(tree_paths(Path(__file__).resolve().parent))  # this tool's own code
    return files


def host_files(host: HostFacts) -> tuple[list[str], list[Path]]:
    """Files the host facts were read from, and the paths whose symlinks lead to them.

    The directories on PATH are among the files: a program added to one of them (a new ``c++``
    ahead of the old) changes that directory's stat.
    """
    files = [os.path.realpath(sys.executable), host.cxx]
    if host.pybind11_dir:
        files.append(host.pybind11_dir)
    files += [d for d in host.env.get("PATH", "").split(os.pathsep) if d]
    found_cxx = compiler_path(host.env)
    linked = [Path(sys.executable), *([Path(found_cxx)] if found_cxx else [])]
    return [f for f in files if f], linked


def report_template(report: RunReport) -> tuple[str, str]:
    """The run report and summary a fast no-op of this build prints, with its times as marks."""
    hits = [
        ComponentResult(name=c.name, key=c.key, status="hit", prefix=c.prefix)
        for c in report.components
    ]
    settled = dataclasses.replace(report, components=hits, fast_path=True, ok=True, jobs=0)
    data = settled.to_json()
    data["started"], data["seconds"] = noop.STARTED_MARK, noop.SECONDS_MARK
    text = json.dumps(data, indent=2) + "\n"
    for mark in (noop.STARTED_MARK, noop.SECONDS_MARK):
        text = text.replace(json.dumps(mark), mark)  # the marks stand for numbers, unquoted
    return text, summary_table(data, timed=False)


def leave(
    argv: Sequence[str],
    layout: Layout,
    plan: Plan,
    host: HostFacts,
    report: RunReport,
    *,
    since_ns: int,
    extra_files: Sequence[str] = (),
    manifest_arg: Path | None = None,
) -> bool:
    """Leave the memo of this build for ``argv``; refuses (and forgets) when a file is too
    recent to trust."""
    cwd = str(Path.cwd())
    path = noop.memo_file(str(layout.home), argv, cwd)
    more_files, linked = host_files(host)
    files = list(dict.fromkeys([*planning_files(plan), *extra_files, *more_files]))
    sigs = [(f, noop.signature(f)) for f in files]
    limit = since_ns - RACY_NS
    if any(sig is not None and max(sig[0], sig[1]) >= limit for _, sig in sigs):
        Path(path).unlink(missing_ok=True)
        return False
    yaml_files = [plan.stack.file]
    yaml_files += [plan.stack.components[c.name].recipe.file for c in plan.components]
    links = manifest_links(yaml_files)
    for target in [*linked, *([manifest_arg] if manifest_arg is not None else [])]:
        links.update(link_chain(target))
    text, summary = report_template(report)
    noop.save(
        path,
        {
            "request": noop.request(argv, cwd),
            "env": noop.build_env(host.env),
            "cpus": os.cpu_count(),
            "files": sigs,
            "links": links,
            "records": [str(layout.entry(c.key) / RECORD) for c in plan.components],
            "vendor": plan.vendor,
            "runs": str(layout.runs()),
            "report": text,
            "summary": summary,
        },
    )
    return True


def forget(argv: Sequence[str], layout: Layout) -> None:
    Path(noop.memo_file(str(layout.home), argv, str(Path.cwd()))).unlink(missing_ok=True)
