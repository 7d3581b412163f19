"""The shape of the code as a checked contract: the import-linter layers (pyproject.toml), no
import cycles between modules, and no module or function too large to read at once."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

from tests.conftest import ROOT

PACKAGES = ("builder", "wheels")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def sources() -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    return [*files, ROOT / "noxfile.py"]


def test_the_import_linter_contracts_are_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    monkeypatch.chdir(ROOT)  # pyproject.toml's [tool.importlinter]
    kept = lint_imports(cache_dir=None, no_logo=True)
    assert kept, capsys.readouterr().out


def test_there_is_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append(" -> ".join((module, *back)))
    assert not cycles, cycles


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_or_function_is_too_large(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path}: over {MAX_MODULE_LINES} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[operator]
    ]
    assert not long, f"{path}: functions over {MAX_FUNCTION_LINES} lines: {long}"
