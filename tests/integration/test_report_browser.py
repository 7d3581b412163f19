"""``report --html`` laid out by a real browser (headless Chromium): a script added to a copy of
the page measures what Chromium drew and writes it into the DOM, which ``--dump-dom`` returns.

The run's timeline has three components on slot 1 (one of them a 0.05 s bar) and one on slot 2;
its wheel, audited for real, holds a library with DT_RPATH (no RUNPATH), an extension whose
name is longer than a graph box shows, and a library whose need is missing (a violation)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder.engine import html_report
from tests.wheelmaker import EXT, LONELY_EXTENSION, Compiler, have_gcc, make_wheel
from wheels import audit_html

BROWSER = shutil.which("chromium")
pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="needs chromium (Debian: apt-get install chromium)"),
    pytest.mark.skipif(not have_gcc(), reason="needs gcc"),
]
SHORT_MODULE = "_core_operators"
LONG_MODULE = "_an_extension_module_whose_name_is_longer_than_any_box_in_the_graph_would_show"

MEASURE = """
<script>
const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.width]; };
const svg = document.getElementById('timeline-svg');
const lanes = [...svg.querySelectorAll('text')].map(t => t.textContent)
  .filter(t => t.startsWith('slot '));
const bars = [...svg.querySelectorAll('g.component')].map(g => ({
  name: g.dataset.component,
  title: (g.querySelector(':scope > title') || {}).textContent || '',
  width: box(g.querySelector('rect'))[2],
  target: box(g)[2],
  label: [...g.querySelectorAll(':scope > text')].map(t => [t.textContent, ...box(t)]),
}));
const svgRight = box(svg)[1];
const nodes = [...document.querySelectorAll('.graph g.node')].map(g => {
  const link = g.querySelector('a');  // dot puts a node's tooltip on a link
  const shape = g.querySelector('rect, path, polygon');
  const texts = [...g.querySelectorAll('text')].map(box);
  return {
    title: link ? link.getAttribute('xlink:title') : g.querySelector('title').textContent,
    text: [...g.querySelectorAll('text')].map(t => t.textContent).join(''),
    rect: box(shape),
    drawn: [Math.min(...texts.map(b => b[0])), Math.max(...texts.map(b => b[1])), 0],
    stroke: shape.getAttribute('stroke'),
    graphRight: box(g.ownerSVGElement)[1],
  };
});
const legend = [...document.querySelectorAll('.legend span[class^=outline-]')].map(s => ({
  kind: s.className, text: s.textContent.trim(),
  stroke: s.querySelector('rect').getAttribute('stroke'),
}));
const table = document.querySelector('table.elfs');
const header = [...table.querySelectorAll('th')].map(th => th.textContent);
const rows = [...table.querySelectorAll('tr')].slice(1).map(
  tr => [...tr.querySelectorAll('td')].map(td => td.textContent));
const out = document.createElement('pre');
out.id = 'measured';
out.textContent = JSON.stringify({lanes, bars, svgRight, nodes, legend, header, rows});
document.body.appendChild(out);
</script>
"""


def rpath_wheel(root: Path) -> Path:
    cc = Compiler(root / "cc")
    gone = cc.shared("libgone.so", "int gone(void) { return 1; }\n", soname="libgone.so")
    user = cc.shared(
        "libuser.so", "int gone(void);\nint f(void) { return gone(); }\n", links=[gone]
    )
    old = cc.shared(
        "libold.so",
        "int g(void) { return 2; }\n",
        soname="libold.so",
        flags=["-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN"],
    )
    files: dict[str, bytes | Path] = {
        "demo/__init__.py": b"",
        "demo/libuser.so": user,
        "demo/libold.so": old,
    }
    for module in (SHORT_MODULE, LONG_MODULE):
        files[f"demo/{module}{EXT}"] = cc.shared(
            f"{module}{EXT}", LONELY_EXTENSION.format(mod=module)
        )
    return make_wheel(root / "wheel", files)


def component(name: str, started: float, seconds: float) -> dict[str, Any]:
    steps = {"configure": seconds * 0.3, "build": seconds * 0.6, "install": seconds * 0.1}
    return {
        "name": name,
        "status": "built",
        "key": f"{name:0<64}"[:64],
        "started": started,
        "seconds": seconds,
        "steps": steps,
        "step_started": {"configure": started, "build": started + steps["configure"]},
    }


LAYOUTS = ["plain", *(["dot"] if shutil.which("dot") else [])]


@pytest.fixture(scope="module", params=LAYOUTS)
def measured(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """What Chromium drew, with the wheel's graph laid out by Graphviz's dot or, as where
    graphviz is not installed, by the plain layout."""
    root = tmp_path_factory.mktemp("report-browser")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "plain":
            patch.setattr(audit_html, "_dot_svg", lambda nodes, edges: None)
        text = render(root)
    assert f"data-layout='{request.param}'" in text
    return measure(root, text)


def render(root: Path) -> str:
    report = {
        "command": "wheel",
        "vendor": "cpu",
        "ok": True,
        "started": 0,
        "manifest": "stack.yaml",
        "seconds": 9.1,
        "jobs": 2,
        "components": [
            component("tiny", 0.0, 0.05),
            component("runtime", 0.05, 3.0),
            component("operators", 3.05, 6.0),
            component("collectives", 0.0, 1.0),
        ],
        "wheels": [str(rpath_wheel(root))],
    }
    return html_report.render(report)


def measure(root: Path, text: str) -> dict[str, Any]:
    page = root / "report.html"
    page.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    profile = root / "profile"
    dom = subprocess.run(
        [
            str(BROWSER),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--window-size=1400,2000",
            "--dump-dom",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found = re.search(r"<pre id=\"measured\">(.*?)</pre>", dom, re.S)
    assert found, "the page's measuring script wrote nothing"
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


def test_each_lane_label_is_drawn_once(measured: dict[str, Any]) -> None:
    assert sorted(measured["lanes"]) == ["slot 1", "slot 2"]


def test_every_bar_has_a_tooltip_and_a_narrow_one_a_target_a_pointer_can_rest_on(
    measured: dict[str, Any],
) -> None:
    bars = {bar["name"]: bar for bar in measured["bars"]}
    assert set(bars) == {"tiny", "runtime", "operators", "collectives"}
    for name, bar in bars.items():
        assert bar["title"].startswith(f"{name}: built in "), bar
    assert bars["tiny"]["width"] < 8 <= bars["tiny"]["target"]
    assert not bars["tiny"]["label"]  # no room on its lane: the tooltip names it


def test_names_drawn_on_the_timeline_stay_clear_of_the_next_bar_and_the_edge(
    measured: dict[str, Any],
) -> None:
    drawn = [(bar, label) for bar in measured["bars"] for label in bar["label"]]
    assert {label[0] for _, label in drawn} >= {"runtime", "operators", "collectives"}
    for _, (_text, _left, right, _width) in drawn:
        assert right <= measured["svgRight"]
    collectives = next(b for b in measured["bars"] if b["name"] == "collectives")
    assert collectives["label"], "a name that fits after its bar is drawn there"


def test_long_extension_names_fit_their_box_or_end_in_an_ellipsis_with_a_tooltip(
    measured: dict[str, Any],
) -> None:
    nodes = {node["title"].split(" (")[0]: node for node in measured["nodes"]}
    short, long = (f"demo/{m}{EXT}" for m in (SHORT_MODULE, LONG_MODULE))
    assert nodes[short]["text"] == short
    shown = nodes[long]["text"]  # whole, or (the plain layout) its end after an ellipsis
    assert shown == long or (shown.startswith("…") and long.endswith(shown[1:]))
    for node in nodes.values():
        (rect_left, rect_right, _), (text_left, text_right, _) = node["rect"], node["drawn"]
        assert rect_left <= text_left and text_right <= rect_right, node
        assert rect_right <= node["graphRight"], node


def test_a_library_with_rpath_shows_it_named(measured: dict[str, Any]) -> None:
    assert "RUNPATH / RPATH" in measured["header"]
    column = measured["header"].index("RUNPATH / RPATH")
    rows = {row[0]: row for row in measured["rows"]}
    assert rows["demo/libold.so"][column] == "RPATH: $ORIGIN"


def test_the_legend_names_the_outline_of_a_flagged_library(measured: dict[str, Any]) -> None:
    legend = {entry["kind"]: entry for entry in measured["legend"]}
    assert set(legend) == {"outline-violation", "outline-warning"}
    assert "orange" in legend["outline-warning"]["text"]
    flagged = next(n for n in measured["nodes"] if n["title"].startswith("demo/libuser.so"))
    assert flagged["stroke"] == legend["outline-violation"]["stroke"]
