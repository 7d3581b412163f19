"""``infini-stack audit`` in the interpreter the launcher starts without ``site``: run there when
its modules are on the launcher's path (no second start), started again with ``site`` when one
is not, the same verdict either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import packaging
import pytest

from builder.cli import RUN, WITHOUT_SITE, needs_site
from tests.conftest import ROOT
from tests.wheelmaker import small_extension_wheel

pytestmark = pytest.mark.integration

SITECUSTOMIZE = "import os\nopen(os.environ['SITE_MARKER'], 'w').close()\n"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = small_extension_wheel(tmp_path_factory.mktemp("nosite"))
    if made is None:
        pytest.skip("gcc is needed for the extension module")
    return made


def _site_dir(module: object) -> str:
    return str(Path(module.__file__).resolve().parent.parent)  # type: ignore[attr-defined]


def launched(wheel: Path, paths: list[str], tmp_path: Path) -> tuple[dict[str, object], bool]:
    """The audit's JSON as ``bin/infini-stack`` runs it (``python -S``, the tool's site-packages
    put on sys.path: here ``paths``), and whether ``site`` ran in the process (a sitecustomize
    module on PYTHONPATH marks it)."""
    tmp_path.mkdir()
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    marker = tmp_path / "site-ran"
    code = f"import sys; sys.path[1:1] = {paths!r}; {RUN}"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "SITE_MARKER": str(marker)}
    env["INFINI_STACK_HOME"] = str(tmp_path / "home")
    argv = [sys.executable, "-S", "-c", code, "audit", "--json", "--no-cache", str(wheel)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    audit: dict[str, object] = json.loads(proc.stdout)["wheels"][0]
    return audit, marker.exists()


def verdict(audit: dict[str, object]) -> tuple[object, ...]:
    kept = ("ok", "tag", "auditwheel_tag", "violations", "warnings", "elfs")
    return tuple(json.dumps(audit[k], sort_keys=True) for k in kept)


def test_audit_runs_without_site_when_its_modules_are_on_the_launchers_path(
    wheel: Path, tmp_path: Path
) -> None:
    modules = [packaging, *(pytest.importorskip(m) for m in WITHOUT_SITE["audit"][1:])]
    paths = list(dict.fromkeys([str(ROOT), *map(_site_dir, modules)]))
    fast, site_ran = launched(wheel, paths, tmp_path / "fast")
    assert not site_ran  # one interpreter, started without site
    again, site_ran_again = launched(wheel, [str(ROOT)], tmp_path / "again")
    assert site_ran_again  # packaging is not on that path: started again, with site
    assert verdict(fast) == verdict(again)


def test_a_command_or_a_missing_module_needs_site(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not needs_site(["audit", "x.whl"])
    assert needs_site(["plan"]) and needs_site(["--help"])
    monkeypatch.setitem(WITHOUT_SITE, "audit", ("packaging", "no_such_module_here"))
    assert needs_site(["audit", "x.whl"])


def test_where_distributions_are_installed_is_the_same_without_site(tmp_path: Path) -> None:
    # A user site whose .pth file adds a directory: only site itself reads .pth files (a venv
    # has no user site, so there both runs see neither).
    user_base, extra = tmp_path / "userbase", tmp_path / "extra"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    user_site = user_base / "lib" / version / "site-packages"
    user_site.mkdir(parents=True)
    extra.mkdir()
    (user_site / "extra.pth").write_text(f"{extra}\n")
    paths = [str(ROOT), _site_dir(packaging)]  # as the launcher puts the tool's site-packages
    show = "import sys; sys.path[1:1] = {paths!r}; del sys.path[0]; "
    show += "from wheels.loading import site_dirs; "
    show += "print('\\n'.join(map(str, site_dirs())))"
    code = show.format(paths=paths)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONUSERBASE"] = str(user_base)
    dirs = []
    for flags in (["-S"], []):
        argv = [sys.executable, *flags, "-c", code]
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=True
        )
        dirs.append(set(proc.stdout.split()) - {str(ROOT)})
    assert dirs[0] == dirs[1] and dirs[0]
    in_venv = sys.prefix != sys.base_prefix
    assert (str(extra) in dirs[1]) == (not in_venv)
