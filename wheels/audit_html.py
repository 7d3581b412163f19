"""The audit as a picture, for one self-contained HTML page (``audit --html``, and the wheel
part of ``report --html``).

Per wheel: its verdict and tags, its violations and warnings, a graph of each ELF file, what it
needs and where each need resolves (in the wheel, another distribution, the system, the
vendor's runtime; missing and libpython in red), the ELF files with a finding drawn in its
colour, and a table per ELF file with its CUDA architectures.

The graph is laid out by Graphviz's ``dot`` when the ``graphviz`` package and the ``dot``
program are there (the ``report`` extra; Debian's ``graphviz``): it is the layered layout of
directed graphs people know, and it writes SVG that goes into the page as it is. Otherwise a
plain layered layout of our own draws it: ELF files loaded by nothing else on the left, the
libraries of the wheel next, what comes from outside on the right, grouped by where.

Nothing on the page is fetched when it is viewed: inline SVG and CSS, no script.
"""

from __future__ import annotations

import html
import zipfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wheels.naming import split_variant
from wheels.variants import problems_of, read_from_wheel

KIND_COLOURS = {
    "wheel": "#2b6cb0",
    "distribution": "#6b46c1",
    "system": "#4a5568",
    "external": "#2f855a",
    "libpython": "#c53030",
    "missing": "#c53030",
}
KIND_WORDS = {
    "wheel": "in the wheel",
    "distribution": "another distribution",
    "system": "system",
    "external": "vendor runtime",
    "libpython": "libpython",
    "missing": "missing",
}
SEVERITY_COLOURS = {"violation": "#c53030", "warning": "#b7791f"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1a202c;
background:#f7fafc}
header{background:#1a202c;color:#fff;padding:16px 28px}header h1{margin:0;font-size:20px}
header .meta{color:#cbd5e0;font-size:13px;margin-top:4px}
nav{padding:8px 28px;background:#edf2f7;border-bottom:1px solid #e2e8f0}
nav a{margin-right:18px;color:#2b6cb0;text-decoration:none}
main{padding:8px 28px 40px}section{margin:22px 0}h2{font-size:17px;margin:0 0 10px}
h3{font-size:15px;margin:18px 0 8px}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #e2e8f0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#edf2f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.ok{color:#2f855a;font-weight:600}.bad{color:#c53030;font-weight:600}
.finding{margin:3px 0;padding:4px 8px;border-left:4px solid;background:#fff}
.violation{border-color:#c53030}.warning{border-color:#b7791f}
.badge{display:inline-block;padding:0 6px;border-radius:8px;color:#fff;font-size:11px}
.graph,.timeline{background:#fff;border:1px solid #e2e8f0;overflow:auto;max-width:100%}
.legend span{margin-right:14px;font-size:12px}
"""


def page(title: str, body: str, subtitle: str = "") -> str:
    """One HTML document, its style inline."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{_e(title)}</h1><div class='meta'>{subtitle}</div></header>"
        f"{body}</body></html>\n"
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def audit_section(wheels: Sequence[Mapping[str, Any]]) -> str:
    """Every wheel of an audit's JSON (``to_json(...)["wheels"]``)."""
    if not wheels:
        return "<p>No wheel was written by this run.</p>"
    return "".join(_wheel(w) for w in wheels)


def _wheel(w: Mapping[str, Any]) -> str:
    path = Path(str(w.get("path", "")))
    verdict = "<span class='ok'>PASS</span>" if w.get("ok") else "<span class='bad'>FAIL</span>"
    tags = ", ".join(w.get("declared_tags") or []) or "(none)"
    head = (
        f"<h3 id='wheel-{_e(path.name)}'>{_e(path.name)} {verdict}</h3>"
        f"<p>vendor {_e(w.get('vendor'))}; declared {_e(tags)}; the ELF contents allow "
        f"<code>{_e(w.get('tag') or '(unknown)')}</code></p>"
    )
    findings = [("error", f) for f in w.get("errors", [])]
    findings += [("violation", f) for f in w.get("violations", [])]
    findings += [("warning", f) for f in w.get("warnings", [])]
    listed = "".join(
        f"<div class='finding {s}'><b>{s}</b> <code>{_e(f.get('member') or '')}</code> "
        f"{_e(f['message'])} <small>[{_e(f['code'])}]</small></div>"
        for s, f in findings
    )
    archs = device_archs(w.get("elfs", []))
    head += _variant_line(path)
    return head + listed + _legend() + graph_svg(w) + _elf_table(w.get("elfs", []), archs)


def _variant_line(wheel: Path) -> str:
    """A PEP 825 variant wheel's label and properties, from its variant.json; nothing for
    metadata that is not valid (the audit's findings say why)."""

    label = split_variant(wheel.name)[1]
    try:
        doc = read_from_wheel(wheel) if label is not None and wheel.is_file() else None
    except (OSError, ValueError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
            zlib.error):  # fmt: skip
        return ""
    if label is None or doc is None or problems_of(doc, label):
        return ""
    props = doc["variants"][label]
    listed = [f"{ns} :: {f} :: {v}" for ns, fs in props.items() for f, vs in fs.items() for v in vs]
    return f"<p>variant <code>{_e(label)}</code>: {_e('; '.join(listed) or 'no properties')}</p>"


def _legend() -> str:
    spans = "".join(
        f"<span><span class='badge' style='background:{c}'>{_e(KIND_WORDS[k])}</span></span>"
        for k, c in KIND_COLOURS.items()
    )
    outlines = "".join(
        f"<span class='outline-{sev}'><svg width='22' height='12'><rect x='1' y='1' width='20' "
        f"height='10' rx='3' fill='{fill}' stroke='{colour}' stroke-width='2.5'/></svg> "
        f"{_e(words)}</span>"
        for sev, colour, fill, words in (
            ("violation", SEVERITY_COLOURS["violation"], "#fff5f5", "outlined in red: a violation"),
            ("warning", SEVERITY_COLOURS["warning"], "#fffaf0", "outlined in orange: a warning"),
        )
    )
    return f"<p class='legend'>{spans}{outlines}</p>"


def device_archs(elfs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """SASS and PTX targets per ELF member that carries device code, from the audit JSON (the
    audit's own reading: ``cuda`` is null for an ELF without any)."""
    out: dict[str, dict[str, list[str]]] = {}
    for elf in elfs:
        value = elf.get("cuda")
        if isinstance(value, Mapping):
            sass, ptx = value.get("sass") or [], value.get("ptx") or []
            if sass or ptx:
                out[elf["member"]] = {"sass": [str(a) for a in sass], "ptx": [str(a) for a in ptx]}
    return out


def _elf_table(elfs: Sequence[Mapping[str, Any]], archs: Mapping[str, Any]) -> str:
    rows = []
    for elf in elfs:
        needs = "<br>".join(
            f"<code>{_e(n['soname'])}</code> <span class='badge' "
            f"style='background:{KIND_COLOURS.get(n['kind'], '#718096')}'>"
            f"{_e(KIND_WORDS.get(n['kind'], n['kind']))}</span> "
            f"<small>{_e(n.get('where') or '')}</small>"
            for n in elf.get("needs", [])
        )
        cuda = archs.get(elf["member"])
        cuda_text = (
            f"SASS {_e(', '.join(cuda['sass']) or '-')}<br>PTX {_e(', '.join(cuda['ptx']) or '-')}"
            if cuda
            else "-"
        )
        rows.append(
            f"<tr><td><code>{_e(elf['member'])}</code></td><td>{_e(elf['kind'])}</td>"
            f"<td><code>{_e(elf.get('soname') or '')}</code></td>"
            f"<td>{_search_path(elf)}</td><td>{needs}</td>"
            f"<td>{cuda_text}</td></tr>"
        )
    head = "<tr><th>ELF</th><th>kind</th><th>SONAME</th><th>RUNPATH / RPATH</th><th>needs</th>"
    return f"<table class='elfs'>{head}<th>CUDA</th></tr>{''.join(rows)}</table>"


def _search_path(elf: Mapping[str, Any]) -> str:
    """The ELF's DT_RUNPATH, or its DT_RPATH named as such (the loader reads RPATH only when
    there is no RUNPATH); both when both are there."""
    runpath, rpath = elf.get("runpath"), elf.get("rpath")
    shown = [f"<code>{_e(runpath)}</code>"] if runpath is not None else []
    shown += [f"RPATH: <code>{_e(rpath)}</code>"] if rpath is not None else []
    return "<br>".join(shown)


# --- the graph ----------------------------------------------------------------------------------


def _nodes_edges(
    w: Mapping[str, Any],
) -> tuple[dict[str, tuple[str, str, str]], list[tuple[str, str, str]]]:
    """Nodes (id -> (label, kind, severity)) and edges (from, to, kind) of a wheel's graph."""
    severity: dict[str, str] = {}
    for sev, key in (("warning", "warnings"), ("violation", "violations")):
        for f in w.get(key, []):
            if f.get("member"):
                severity[f["member"]] = sev
    elfs = list(w.get("elfs", []))
    nodes = {
        e["member"]: (e["member"], "elf:" + e["kind"], severity.get(e["member"], "")) for e in elfs
    }
    edges = []
    for e in elfs:
        for need in e.get("needs", []):
            target = need.get("where") if need["kind"] == "wheel" else None
            if target not in nodes:
                target = f"{need['kind']}:{need['soname']}"
                bad = "violation" if need["kind"] in ("missing", "libpython") else ""
                nodes.setdefault(target, (need["soname"], need["kind"], bad))
            edges.append((e["member"], str(target), need["kind"]))
    return nodes, edges


def graph_svg(w: Mapping[str, Any], *, layout: str = "auto") -> str:
    """The wheel's graph as inline SVG, by dot where it can be run (``layout="auto"``), else,
    or with ``layout="plain"``, laid out here."""
    nodes, edges = _nodes_edges(w)
    if not nodes:
        return ""
    svg = _dot_svg(nodes, edges) if layout == "auto" else None
    layout = "dot"
    if svg is None:
        svg, layout = _plain_svg(nodes, edges), "plain"
    return f"<div class='graph' data-layout='{layout}'>{svg}</div>"


def _dot_svg(
    nodes: Mapping[str, tuple[str, str, str]], edges: Sequence[tuple[str, str, str]]
) -> str | None:
    try:
        import graphviz
    except ImportError:
        return None
    g = graphviz.Digraph(
        # At most 10.5 x 9 inches: dot scales a larger graph down to fit a page's width.
        graph_attr={
            "rankdir": "LR",
            "fontname": "Helvetica",
            "nodesep": "0.25",
            "size": "10.5,9",
            "pad": "0.3",
        },
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9"},
    )
    ids = {node: f"n{i}" for i, node in enumerate(nodes)}
    for kind in ("distribution", "system", "external", "missing", "libpython"):
        members = [n for n, (_, k, _) in nodes.items() if k == kind]
        if members:
            with g.subgraph(name=f"cluster_{kind}") as sub:
                sub.attr(label=KIND_WORDS[kind], color="#cbd5e0", fontname="Helvetica")
                for n in members:
                    _dot_node(sub, ids[n], nodes[n])
    for n, spec in nodes.items():
        if spec[1].startswith("elf:"):
            _dot_node(g, ids[n], spec)
    for a, b, kind in edges:
        g.edge(ids[a], ids[b], color=KIND_COLOURS.get(kind, "#718096"))
    try:
        svg = str(g.pipe(format="svg").decode())
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError):
        return None
    return svg[svg.index("<svg") :]


def _dot_node(g: Any, node_id: str, spec: tuple[str, str, str]) -> None:
    label, kind, sev = spec
    colour = KIND_COLOURS.get(kind, KIND_COLOURS["wheel"] if kind.startswith("elf:") else "#718096")
    g.node(
        node_id,
        label=label,
        fillcolor="#fff5f5" if sev == "violation" else ("#fffaf0" if sev else "#ffffff"),
        color=SEVERITY_COLOURS.get(sev, colour),
        penwidth="2.5" if sev else "1.2",
        tooltip=f"{label} ({KIND_WORDS.get(kind, kind.removeprefix('elf:'))})",
    )


def _columns(
    nodes: Mapping[str, tuple[str, str, str]], edges: Sequence[tuple[str, str, str]]
) -> list[list[str]]:
    """Column 0: ELF files nothing in the wheel loads; 1: the wheel's other ELF files; then
    one column of outside targets, grouped by kind."""
    loaded = {b for _, b, k in edges if k == "wheel"}
    elf = [n for n, (_, k, _) in nodes.items() if k.startswith("elf:")]
    order = list(KIND_WORDS)
    outside = sorted(
        (n for n, (_, k, _) in nodes.items() if not k.startswith("elf:")),
        key=lambda n: (order.index(nodes[n][1]) if nodes[n][1] in order else 9, nodes[n][0]),
    )
    return [
        c
        for c in ([n for n in elf if n not in loaded], [n for n in elf if n in loaded], outside)
        if c
    ]


CHAR = 7.5  # pixels per character of a 12px monospace label, a little over what fonts use
LONGEST = 64  # characters of a label a box shows; a longer one ends in "…" (the tooltip has it)


def _plain_svg(
    nodes: Mapping[str, tuple[str, str, str]], edges: Sequence[tuple[str, str, str]]
) -> str:
    columns = _columns(nodes, edges)
    box_h, gap_x, gap_y = 26, 120, 12
    widths = [16 + CHAR * min(max(len(nodes[n][0]) for n in column), LONGEST) for column in columns]
    where: dict[str, tuple[float, int, float]] = {}
    left = 20.0
    for ci, column in enumerate(columns):
        for ri, n in enumerate(column):
            where[n] = (left, 20 + ri * (box_h + gap_y), widths[ci])
        left += widths[ci] + gap_x
    width = round(left - gap_x + 20)
    height = 40 + max(len(c) for c in columns) * (box_h + gap_y)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' font-family='monospace' font-size='12'>"
    ]
    for a, b, kind in edges:
        (x1, y1, w1), (x2, y2, w2) = where[a], where[b]
        sx, sy, ex, ey = x1 + w1, y1 + box_h / 2, x2, y2 + box_h / 2
        if x2 <= x1:  # a library loading one in its own column: around the right side
            ex = x2 + w2
        mid = (sx + ex) / 2 if ex > sx else sx + 60
        colour = KIND_COLOURS.get(kind, "#718096")
        parts.append(
            f"<path d='M{sx:g},{sy:g} C{mid:g},{sy:g} {mid:g},{ey:g} {ex:g},{ey:g}' fill='none' "
            f"stroke='{colour}' stroke-width='1.3'/>"
        )
    for n, (x, y, w) in where.items():
        parts.append(_plain_box(nodes[n], x, y, w, box_h))
    return "".join(parts) + "</svg>"


def _plain_box(spec: tuple[str, str, str], x: float, y: int, w: float, h: int) -> str:
    label, kind, sev = spec
    base = KIND_COLOURS["wheel"] if kind.startswith("elf:") else KIND_COLOURS.get(kind, "#718096")
    stroke = SEVERITY_COLOURS.get(sev, base)
    fill = "#fff5f5" if sev == "violation" else ("#fffaf0" if sev else "#ffffff")
    shown = label if len(label) <= LONGEST else "…" + label[-(LONGEST - 1) :]
    what = KIND_WORDS.get(kind, kind.removeprefix("elf:"))
    return (
        f"<g class='node'><title>{_e(label)} ({_e(what)})</title>"
        f"<rect x='{x:g}' y='{y}' width='{w:g}' height='{h}' rx='6' fill='{fill}' "
        f"stroke='{stroke}' stroke-width='{2.5 if sev else 1.2}'/>"
        f"<text x='{x + 8:g}' y='{y + 17}'>{_e(shown)}</text></g>"
    )


def audit_page(wheels: Sequence[Mapping[str, Any]], generator: str) -> str:
    """``audit --html``: the audit part alone, as a page."""
    bad = sum(not w.get("ok") for w in wheels)
    subtitle = f"{len(wheels)} wheel(s), {bad} failed; {_e(generator)}"
    body = f"<main><section id='wheels'><h2>Audit</h2>{audit_section(wheels)}</section></main>"
    return page("infini-stack audit", body, subtitle)
