"""The release directory: written whole at the end or not at all (a staging directory beside it,
renamed into place), with its SHA256SUMS and the report of the release's stages."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.core.digest import file_digest
from builder.core.errors import StackError, UsageError

SUMS = "SHA256SUMS"
REPORT = "release-report.json"
BUILD_REPORT = "build-report.json"
CHECK_LOG = "check.log"  # what the vendor's runtime check printed


# --- the release directory ----------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return file_digest(path).hex()


def write_sums(directory: Path) -> Path:
    """``SHA256SUMS`` over every other file in ``directory``, in ``sha256sum -c`` format."""
    lines = [
        f"{sha256_file(p)}  {p.name}"
        for p in sorted(directory.iterdir())
        if p.is_file() and p.name != SUMS
    ]
    target = directory / SUMS
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def check_output_dir(out: Path) -> None:
    """The output directory must not exist yet, or be empty: it is replaced as a whole."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"the release directory {out} exists and is not empty",
            hint="give a new or empty directory; a release is written whole or not at all",
        )


@contextlib.contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """A temporary directory beside ``out``, renamed to ``out`` when the block succeeds."""
    check_output_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield staging
        if out.exists():
            out.rmdir()  # empty: checked above
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


@dataclass
class ReleaseReport:
    vendor: str
    manifest: str
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256
    ok: bool = False

    def step(self, name: str, **data: Any) -> None:
        self.steps[name] = data

    def write(self, directory: Path) -> Path:
        target = directory / REPORT
        target.write_text(json.dumps(self.__dict__, indent=2, default=str) + "\n", encoding="utf-8")
        return target


def sbom_of(wheel: Path) -> str:
    """The SBOM a wheel carries in ``.dist-info/sboms/``."""
    from builder.pipeline.sbom import SBOM_PATH

    with zipfile.ZipFile(wheel) as zf:
        name = next(
            (
                n
                for n in zf.namelist()
                if n.split("/", 1)[0].endswith(".dist-info") and n.split("/", 1)[-1] == SBOM_PATH
            ),
            None,
        )
        if name is None:
            raise StackError(f"{wheel.name} carries no SBOM ({SBOM_PATH} in its .dist-info)")
        return zf.read(name).decode()
