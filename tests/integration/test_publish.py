"""`publish DIR --repository URL`: the mini stack's release uploaded to a real pypiserver,
started on loopback with a htpasswd file (written by passlib), through twine's upload API."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import MINI
from tests.integration.test_package_index import free_port, listening, release

pytestmark = pytest.mark.integration

USER = "uploader"
PASSWORD = "pw-7f3a9c1e"
SERVER = ("pypiserver>=2.3", "passlib>=1.7")


@pytest.fixture(scope="module")
def release_dir(built_cpu_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("publish")
    home = base / "home"
    shutil.copytree(built_cpu_store, home / "store", symlinks=True)
    release(home, MINI / "stack.yaml", base / "release", base / "www")
    return base / "release"


@pytest.fixture(scope="module")
def server_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of its own holding pypiserver and passlib: pypiserver requires a pip newer than
    the one the tests' venv keeps (and upgrades pip wherever it is installed)."""
    venv = tmp_path_factory.mktemp("pypiserver") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *SERVER],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot pip install {' '.join(SERVER)}: {done.stderr.strip()[-300:]}")
    return python


# passlib 1.7.4 imports the stdlib's crypt (deprecated since Python 3.11); it is what pypiserver
# checks passwords with, so it is the right writer of the file.
HTPASSWD = """\
import sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
from passlib.apache import HtpasswdFile
passwords = HtpasswdFile(sys.argv[1], new=True)
passwords.set_password(sys.argv[2], sys.argv[3])
passwords.save()
"""


@contextlib.contextmanager
def pypiserver(base: Path, python: Path) -> Iterator[tuple[str, Path, Path]]:
    """pypiserver on loopback, uploads allowed to USER only: its URL, packages dir and log."""
    htpasswd = base / "htpasswd"
    subprocess.run([python, "-c", HTPASSWD, str(htpasswd), USER, PASSWORD], check=True)
    packages = base / "packages"
    packages.mkdir()
    port = free_port()
    argv = [str(python), "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port)]
    argv += ["-P", str(htpasswd), "-a", "update", str(packages)]
    log = base / "pypiserver.log"
    with listening(argv, port, log) as url:
        yield f"{url}/", packages, log


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.pypirc of this machine
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")


@pytest.fixture
def no_credentials(credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TWINE_USERNAME")
    monkeypatch.delenv("TWINE_PASSWORD")


def test_publish_uploads_the_release_then_a_second_run_skips_what_is_there(
    release_dir: Path,
    tmp_path: Path,
    server_python: Path,
    credentials: None,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    (wheel,) = release_dir.glob("*.whl")
    with pypiserver(tmp_path, server_python) as (url, packages, _):
        first = cli("publish", release_dir, "--repository", url)
        assert first.code == 0, first.err
        assert f"uploaded      {wheel.name}" in first.err
        assert (packages / wheel.name).read_bytes() == wheel.read_bytes()
        again = cli("publish", release_dir, "--repository", url)
    assert again.code == 0, again.err
    assert f"already there {wheel.name}" in again.err
    assert PASSWORD not in first.out + first.err + again.out + again.err


def test_publish_reads_the_repository_and_credentials_from_pypirc(
    release_dir: Path,
    tmp_path: Path,
    server_python: Path,
    no_credentials: None,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    with pypiserver(tmp_path, server_python) as (url, packages, _):
        home = tmp_path / "home"
        home.mkdir()
        (home / ".pypirc").write_text(
            "[distutils]\nindex-servers = local\n\n"
            f"[local]\nrepository = {url}\nusername = {USER}\npassword = {PASSWORD}\n"
        )
        done = cli("publish", release_dir, "--repository", "local")
        assert done.code == 0, done.err
        assert [p.name for p in packages.iterdir()] == [w.name for w in release_dir.glob("*.whl")]
    assert PASSWORD not in done.out + done.err


def test_a_wrong_password_fails_per_file_with_exit_2_and_no_secret_in_output(
    release_dir: Path,
    tmp_path: Path,
    server_python: Path,
    credentials: None,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    wrong = "not-the-password-41d2"
    monkeypatch.setenv("TWINE_PASSWORD", wrong)
    (wheel,) = release_dir.glob("*.whl")
    with pypiserver(tmp_path, server_python) as (url, packages, _):
        done = cli("publish", release_dir, "--repository", url)
        assert list(packages.iterdir()) == []
    assert done.code == 2
    assert "1 of 1 file(s) not uploaded" in done.err
    assert f"FAILED        {wheel.name}: HTTP 403" in done.err
    assert "Traceback" not in done.err
    assert wrong not in done.out + done.err
    assert PASSWORD not in done.out + done.err


def test_a_tampered_release_is_refused_before_any_upload(
    release_dir: Path,
    tmp_path: Path,
    server_python: Path,
    credentials: None,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    tampered = tmp_path / "tampered"
    shutil.copytree(release_dir, tampered)
    (wheel,) = tampered.glob("*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    with pypiserver(tmp_path, server_python) as (url, packages, log):
        done = cli("publish", tampered, "--repository", url)
        assert list(packages.iterdir()) == []
        assert "POST" not in log.read_text()
    assert done.code == 2
    assert f"{wheel.name}: sha256 differs from SHA256SUMS" in done.err
    assert "nothing was uploaded" in done.err


def test_publish_refuses_a_directory_without_sha256sums(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    done = cli("publish", tmp_path, "--repository", "http://127.0.0.1:9/")
    assert done.code == 2
    assert "has no SHA256SUMS" in done.err


def test_publish_without_credentials_says_where_to_put_them_without_a_traceback(
    release_dir: Path,
    tmp_path: Path,
    server_python: Path,
    no_credentials: None,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    with pypiserver(tmp_path, server_python) as (url, packages, _):
        done = cli("publish", release_dir, "--repository", url)
        assert list(packages.iterdir()) == []
    assert done.code == 2
    assert "error: no credentials for" in done.err
    assert "hint: set TWINE_USERNAME and TWINE_PASSWORD" in done.err
    assert "Traceback" not in done.err
