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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def package_imports(module: str, text: str, packages: set[str]) -> set[str]:
    """The package ``__init__`` modules an import runs or reads that grimp leaves out: ``from
    P import sub`` reads P's namespace (grimp records only P.sub), and ``import a.b.c`` from
    outside ``a.b`` runs ``a/__init__`` and ``a/b/__init__`` first."""
    own = {*ancestors(module), module}
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            found |= {node.module} & packages
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            found |= {p for p in ancestors(name) if p in packages and p not in own}
    return found - {module}


def import_graph() -> grimp.ImportGraph:
    """grimp's graph with the imports of package ``__init__`` files that Python makes."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    packages = {module_name(p) for p in files if p.name == "__init__.py"}
    for path in files:
        module = module_name(path)
        for package in package_imports(module, path.read_text(encoding="utf-8"), packages):
            graph.add_import(importer=module, imported=package)
    return graph


PACKAGE_IMPORTS = [
    ("wheels.audit.pool", "from wheels.audit import forks", {"wheels.audit"}),
    ("wheels.audit.pool", "from wheels.audit.forks import ForkPool", set()),
    ("wheels.audit.pool", "import wheels.audit.forks", set()),
    ("builder.cli", "import wheels.audit.forks", {"wheels", "wheels.audit"}),
    ("builder.cli", "from wheels.audit.core import audit_wheel", {"wheels", "wheels.audit"}),
    ("wheels.audit", "from wheels.audit.core import audit_wheel", set()),
]


@pytest.mark.parametrize(("module", "text", "expected"), PACKAGE_IMPORTS)
def test_the_cycle_check_sees_the_package_inits_an_import_runs(
    module: str, text: str, expected: set[str]
) -> None:
    assert package_imports(module, text, {"wheels", "wheels.audit"}) == expected


def test_there_is_no_import_cycle_between_modules() -> None:
    graph = import_graph()
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
