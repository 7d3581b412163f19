"""A real OCI registry for tests and benchmarks: Debian's ``docker-registry`` (the reference
distribution server), on 127.0.0.1 with a free port, a temporary storage directory and config,
optionally behind htpasswd (bcrypt) basic auth. No mock: the tool talks HTTP to the real thing.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("docker-registry", "registry")
APT_HINT = "apt-get install -y docker-registry apache2-utils"


def registry_binary() -> str | None:
    return next((found for b in BINARIES if (found := shutil.which(b))), None)


def bcrypt_line(user: str, password: str) -> str | None:
    """An htpasswd line with a bcrypt hash (the registry takes no other), or None."""
    htpasswd = shutil.which("htpasswd")
    if htpasswd:
        out = subprocess.run(
            [htpasswd, "-Bbn", user, password], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    try:
        import bcrypt  # type: ignore[import-not-found]
    except ImportError:
        return None
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt()).decode()
    return f"{user}:{hashed}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Registry:
    workdir: Path
    port: int = field(default_factory=free_port)
    users: dict[str, str] = field(default_factory=dict)  # htpasswd users (none: no auth)
    auth: str = ""  # an ``auth:`` section instead (e.g. a token service's)
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, repository: str = "infini/cache") -> str:
        return f"oci://{self.host}/{repository}"

    @property
    def storage(self) -> Path:
        return self.workdir / "storage"

    def _config(self) -> Path:
        auth = self.auth
        if self.users:
            lines = [bcrypt_line(u, p) for u, p in self.users.items()]
            if any(line is None for line in lines):
                raise RuntimeError("no htpasswd and no bcrypt: cannot make a bcrypt password file")
            htpasswd = self.workdir / "htpasswd"
            htpasswd.write_text("\n".join(str(line) for line in lines) + "\n")
            auth = f"auth:\n  htpasswd:\n    realm: test-realm\n    path: {htpasswd}\n"
        config = self.workdir / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.storage}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.host}\n" + auth
        )
        return config

    def start(self) -> Registry:
        binary = registry_binary()
        if binary is None:
            raise RuntimeError(f"no registry binary ({APT_HINT})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(exist_ok=True)
        with (self.workdir / "registry.log").open("ab") as log:  # the child keeps its copy
            self.process = subprocess.Popen(
                [binary, "serve", str(self._config())], stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.workdir / "registry.log").read_text(errors="replace")
                raise RuntimeError(f"the registry exited: {log[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2):
                    return
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError("the registry did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@contextlib.contextmanager
def running(workdir: Path, users: dict[str, str] | None = None) -> Iterator[Registry]:
    registry = Registry(workdir, users=dict(users or {})).start()
    try:
        yield registry
    finally:
        registry.stop()
