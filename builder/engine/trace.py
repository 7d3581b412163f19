"""A run report as a Chrome trace-event file (``report --trace``; Perfetto, chrome://tracing).

One track per job slot: the components that ran on it, each with its steps, and under each
component's build step its Ninja edges read from ``.ninja_log`` in its build directory, one
track per edge that ran at the same time (as ninjatracing lays them out). Store hits, and
entries pulled from a remote cache, are marked on a track of their own (a pulled entry that
took time is a slice on its slot, like a build). The critical path is a track too, and its
slices and edges carry ``critical: true`` (and chrome://tracing's "terrible" colour).

Trace-event format: "Trace Event Format" (Google, the JSON Object Format): complete events
(``ph: X``, ``ts``/``dur`` in microseconds), instant events (``ph: i``, ``s: t``) and metadata
events (``ph: M``: ``process_name``, ``thread_name``, ``thread_sort_index``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PID = 1
STORE_TID = 1
CRITICAL_TID = 2
RELEASE_TID = 3  # a release's stages (preflight ... sbom), when the run was one
CHECK_BASE = 1_000_000  # the runtime check's children: lane n is tid CHECK_BASE + n
SLOT_BASE = 10  # slot n is tid SLOT_BASE + 100 * n; its Ninja tracks follow it
# A build of several interpreters: interpreter i's components in lanes of their own, from
# tid PYTHON_BASE + 10_000 * i (slots as above), and its release stages at RELEASE_TID + 10 * i.
PYTHON_BASE = 100_000
CRITICAL = "terrible"  # a reserved colour name of chrome://tracing
Event = dict[str, Any]


@dataclass(frozen=True)
class Edge:
    """One Ninja edge of the last build in a ``.ninja_log``: ms after Ninja started."""

    start: int
    end: int
    outputs: tuple[str, ...]


def ninja_edges(build_dir: Path, not_before: float | None = None) -> list[Edge]:
    """The edges of the last Ninja run in ``build_dir`` (ninjatracing's rule: an end earlier
    than the previous line's starts a new build); none when the log is older than
    ``not_before`` (seconds since the epoch: that run rebuilt nothing)."""
    log = build_dir / ".ninja_log"
    try:
        if not_before is not None and log.stat().st_mtime < not_before:
            return []
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    edges: dict[str, Edge] = {}
    last_end = 0
    for line in lines:
        fields = line.split("\t")
        if line.startswith("#") or len(fields) < 5 or not (fields[0] + fields[1]).isdigit():
            continue
        start, end, output, command = int(fields[0]), int(fields[1]), fields[3], fields[4]
        if end < last_end:
            edges = {}
        last_end = end
        known = edges.get(command)
        outputs = (*known.outputs, output) if known else (output,)
        edges[command] = Edge(start, end, outputs)
    return sorted(edges.values(), key=lambda e: (e.start, e.end))


def lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
    """The lowest free lane for each (start, end), in the order given (sorted by start)."""
    ends: list[float] = []
    out: list[int] = []
    for start, end in spans:
        lane = next((i for i, e in enumerate(ends) if e <= start + 1e-9), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        out.append(lane)
    return out


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def span(c: Mapping[str, Any]) -> tuple[float, float] | None:
    if c.get("started") is None or c["status"] in ("hit", "skipped"):
        return None
    return float(c["started"]), float(c["started"]) + float(c.get("seconds") or 0.0)


def critical_components(components: Sequence[Mapping[str, Any]]) -> list[str]:
    """The chain that decided the run's length: from the last component to finish, back
    through the dependency that finished last (or, without dependencies in the report, the
    component that finished last before it started)."""
    spans = {c["name"]: s for c in components if (s := span(c)) is not None}
    if not spans:
        return []
    depends = {c["name"]: c.get("depends") for c in components}
    chain = [max(spans, key=lambda n: spans[n][1])]
    while True:
        start, deps = spans[chain[-1]][0], depends.get(chain[-1])
        if deps is not None:
            before = [d for d in deps if d in spans]
        else:  # a report from before dependencies were recorded
            before = [n for n, s in spans.items() if s[1] <= start + 1e-3 and n not in chain]
        if not before:
            return chain[::-1]
        chain.append(max(before, key=lambda n: spans[n][1]))


def critical_edges(edges: Sequence[Edge]) -> set[int]:
    """Indexes of the edges on the longest chain ending with the last edge to finish."""
    if not edges:
        return set()
    at = max(range(len(edges)), key=lambda i: edges[i].end)
    chain = {at}
    while True:
        earlier = [i for i, e in enumerate(edges) if e.end <= edges[at].start and i not in chain]
        if not earlier:
            return chain
        at = max(earlier, key=lambda i: edges[i].end)
        chain.add(at)


def trace(report: Mapping[str, Any]) -> dict[str, Any]:
    """The trace-event JSON object of a run report (``runs/*.json``)."""
    components = list(report.get("components", []))
    critical = set(critical_components(components))
    events: list[Event] = [
        _meta("process_name", 0, name=f"{report['command']} --vendor {report['vendor']}"),
        _meta("thread_name", STORE_TID, name="store hits and pulls"),
        _meta("thread_sort_index", STORE_TID, sort_index=0),
        _meta("thread_name", CRITICAL_TID, name="critical path"),
        _meta("thread_sort_index", CRITICAL_TID, sort_index=1),
    ]
    groups = by_interpreter(components)
    for index, (tag, group) in enumerate(groups.items()):
        base = PYTHON_BASE + 10_000 * (index - 1) if tag else SLOT_BASE
        events += _slots(group, base, tag, critical, report)
    events += _settled(c for c in components if span(c) is None)
    events += _release_stages(report)
    events += _check_children(report)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other(report)}


def by_interpreter(
    components: Sequence[Mapping[str, Any]],
) -> dict[str, list[Mapping[str, Any]]]:
    """The components by interpreter tag (``minilm@cp312``: ``cp312``); shared ones (and every
    component of a build for one interpreter) under ``""``, first."""
    from builder.plan_interpreters import split_lane

    groups: dict[str, list[Mapping[str, Any]]] = {"": []}
    for c in components:
        groups.setdefault(split_lane(str(c["name"]))[1] or "", []).append(c)
    return groups


def _slots(
    components: Sequence[Mapping[str, Any]],
    base: int,
    tag: str,
    critical: set[str],
    report: Mapping[str, Any],
) -> list[Event]:
    """The timed components as slots (lanes of work that do not overlap) from tid ``base``,
    named ``slot N`` (``cp312 slot N`` for one interpreter's)."""
    timed = sorted((s, c) for c in components if (s := span(c)) is not None)
    slots = lanes([s for s, _ in timed])
    events: list[Event] = []
    for slot in sorted(set(slots)):
        tid = base + 100 * slot
        name = f"{tag} slot {slot + 1}" if tag else f"slot {slot + 1}"
        events += [
            _meta("thread_name", tid, name=name),
            _meta("thread_sort_index", tid, sort_index=tid),
        ]
    for slot, (_, c) in zip(slots, timed, strict=True):
        events += _component(c, base + 100 * slot, c["name"] in critical, report)
    return events


def _release_stages(report: Mapping[str, Any]) -> list[Event]:
    """A lane of the release's stages, placed by their wall-clock start (preflight, which runs
    before the build's report begins, starts before zero)."""
    stages = (report.get("release") or {}).get("stages") or {}
    timed = {n: s for n, s in stages.items() if "at" in s and "seconds" in s}
    if not timed:
        return []
    tags = list(dict.fromkeys(n.partition(" ")[2] for n in timed))
    events = []
    for index, tag in enumerate(tags):
        tid = RELEASE_TID + 10 * index
        name = f"release stages {tag}" if tag else "release stages"
        events += [
            _meta("thread_name", tid, name=name),
            _meta("thread_sort_index", tid, sort_index=2),
        ]
    for name, stage in timed.items():
        start = float(stage["at"]) - float(report.get("started", 0.0))
        ok = stage.get("ok", True)
        tid = RELEASE_TID + 10 * tags.index(name.partition(" ")[2])
        events.append(_slice(name, "release", tid, start, float(stage["seconds"]), ok=ok))
    return events


def _check_children(report: Mapping[str, Any]) -> list[Event]:
    """The runtime check's children as lanes, each child a slice at its wall-clock start (the
    check's summary line says when each ran: ``children``)."""
    from builder.engine.report import stages_of

    events: list[Event] = []
    for index, (tag, check) in enumerate(stages_of(report.get("release") or {}, "check")):
        ran = sorted(
            (float(c["start"]) - float(report.get("started", 0.0)), float(c["seconds"]), c)
            for c in check.get("children") or []
            if "start" in c and "seconds" in c
        )
        placed = lanes([(start, start + seconds) for start, seconds, _ in ran])
        base = CHECK_BASE + 10_000 * index
        for lane in sorted(set(placed)):
            name = f"check {tag} child {lane + 1}" if tag else f"check child {lane + 1}"
            events += [
                _meta("thread_name", base + lane, name=name),
                _meta("thread_sort_index", base + lane, sort_index=base + lane),
            ]
        for lane, (start, seconds, child) in zip(placed, ran, strict=True):
            ok = child.get("outcome") == "ok"
            name = str(child["child"])
            events.append(_slice(name, "check", base + lane, start, seconds, ok=ok))
    return events


def _other(report: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("command", "vendor", "manifest", "started", "seconds", "ok", "jobs", "launcher", "cpu")
    other = {k: report.get(k) for k in keys}
    release = report.get("release") or {}
    return {**other, "release_cpu": release["cpu"]} if release.get("cpu") else other


def _meta(kind: str, tid: int, **args: Any) -> Event:
    return {"ph": "M", "name": kind, "pid": PID, "tid": tid, "args": args}


def _slice(name: str, cat: str, tid: int, start: float, seconds: float, **args: Any) -> Event:
    event: Event = {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": PID,
        "tid": tid,
        "ts": _us(start),
        "dur": max(_us(seconds), 1),
        "args": args,
    }
    if args.get("critical"):
        event["cname"] = CRITICAL
    return event


def _component(
    c: Mapping[str, Any], tid: int, critical: bool, report: Mapping[str, Any]
) -> list[Event]:
    start, seconds = float(c["started"]), float(c.get("seconds") or 0.0)
    name = c["name"] if c["status"] != "pulled" else f"{c['name']} (pulled)"
    args = {"status": c["status"], "key": c["key"], "jobs": c.get("jobs"), "critical": critical}
    events = [_slice(name, "component", tid, start, seconds, **args)]
    if critical:
        events.append(_slice(name, "critical", CRITICAL_TID, start, seconds, **args))
    at = start
    for step, took in c.get("steps", {}).items():
        at = float(c.get("step_started", {}).get(step, at))
        events.append(_slice(step, "step", tid, at, float(took), component=c["name"]))
        if step == "build" and c.get("build_dir"):
            edges = ninja_edges(Path(c["build_dir"]), not_before=report.get("started"))
            events += _edges(edges, tid, at, critical, c["name"])
        at += float(took)
    events += [_instant(f"{step} reused", "step", tid, start) for step in c.get("reused", [])]
    return events


def _edges(edges: Sequence[Edge], tid: int, at: float, critical: bool, name: str) -> list[Event]:
    if not edges:
        return []
    on_path = critical_edges(edges) if critical else set()
    tracks = lanes([(e.start / 1000, e.end / 1000) for e in edges])
    events: list[Event] = []
    for track in sorted(set(tracks)):
        events += [
            _meta("thread_name", tid + 1 + track, name=f"{name}: ninja {track + 1}"),
            _meta("thread_sort_index", tid + 1 + track, sort_index=tid + 1 + track),
        ]
    for i, (edge, track) in enumerate(zip(edges, tracks, strict=True)):
        more = len(edge.outputs) - 1
        label = Path(edge.outputs[0]).name + (f" +{more}" if more else "")
        events.append(
            _slice(
                label,
                "ninja",
                tid + 1 + track,
                at + edge.start / 1000,
                (edge.end - edge.start) / 1000,
                outputs=list(edge.outputs),
                component=name,
                critical=i in on_path,
            )
        )
    return events


def _instant(name: str, cat: str, tid: int, at: float, **args: Any) -> Event:
    return {
        "ph": "i",
        "s": "t",
        "name": name,
        "cat": cat,
        "pid": PID,
        "tid": tid,
        "ts": _us(at),
        "args": args,
    }


def _settled(components: Iterable[Mapping[str, Any]]) -> Iterator[Event]:
    """Store hits and pulls that took no slot: instants at the run's start."""
    for c in components:
        if c["status"] in ("hit", "pulled"):
            at = float(c.get("started") or 0.0)
            yield _instant(f"{c['name']}: {c['status']}", c["status"], STORE_TID, at, key=c["key"])


def write(report: Mapping[str, Any], target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(trace(report), indent=1) + "\n", encoding="utf-8")
    return target
