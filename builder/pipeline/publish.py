"""Distributing a release: its wheel into a static per-vendor index (:mod:`wheels.index`), and
``publish``, which uploads a verified release to a PyPI-compatible repository with twine.

``publish`` checks SHA256SUMS before anything leaves the machine: every file it names must be
there with its digest, and every wheel must be named. Each wheel is then uploaded alone and its
outcome reported (uploaded, already there, failed), so that a partial upload says what is left,
and running it again skips what the repository already has (twine's skip-existing test: 409
from pypiserver, 400 "already exists" from PyPI). Credentials come from where twine finds them
(TWINE_USERNAME/TWINE_PASSWORD, the .pypirc section, the keyring); they are registered with
:mod:`builder.core.redact`, so that no output carries them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from builder.core.digest import file_digest
from builder.core.errors import UsageError
from builder.core.redact import redact, register_secret

if TYPE_CHECKING:
    from twine.repository import Repository
    from twine.settings import Settings

SUMS = "SHA256SUMS"  # as builder.pipeline.release writes it
Outcome = Literal["uploaded", "exists", "failed"]


class PublishError(UsageError):
    """The repository refused or could not be reached: its address, the credentials or the
    server are the user's to put right (exit 2, like any usage problem)."""


# --- the index ------------------------------------------------------------------------------


def index_release(root: Path, wheels: Sequence[Path]) -> list[Path]:
    """Merge the release's wheels into the index tree under ``root``; prints where each
    vendor's index is."""
    from wheels.index import SIMPLE, add_wheels, vendor_label

    try:
        written = add_wheels(root, wheels)
    except UsageError as exc:
        places = ", ".join(sorted({str(w.parent) for w in wheels}))
        exc.message += f"\nthe index is unchanged; the release in {places} is whole"
        raise
    for label in sorted({vendor_label(w.name) for w in wheels}):
        print(f"index: {root / label / SIMPLE} ({len(written)} new file(s))", file=sys.stderr)
    return written


# --- verifying a release --------------------------------------------------------------------


def read_sums(directory: Path) -> dict[str, str]:
    """``SHA256SUMS`` of a release directory: name -> hex digest."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a release directory (no such directory)")
    sums = directory / SUMS
    if not sums.is_file():
        raise UsageError(
            f"{directory} has no {SUMS}", hint="publish takes a directory `release` wrote"
        )
    entries: dict[str, str] = {}
    for number, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or "/" in name or not name:
            raise UsageError(f"{sums}:{number}: not a `sha256sum` line: {line!r}")
        entries[name] = digest.lower()
    return entries


def verified_wheels(directory: Path) -> list[Path]:
    """The release's wheels, once every file SHA256SUMS names has its digest and every wheel
    is named there."""
    sums = read_sums(directory)
    problems = []
    for name, digest in sorted(sums.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif file_digest(path).hex() != digest:
            problems.append(f"{name}: sha256 differs from {SUMS}")
    wheels = sorted(directory.glob("*.whl"))
    problems += [f"{w.name}: not in {SUMS}" for w in wheels if w.name not in sums]
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise UsageError(
            f"{directory} does not match its {SUMS}; nothing was uploaded:\n{listed}",
            hint="publish a release as `release` wrote it",
        )
    if not wheels:
        raise UsageError(f"{directory} holds no wheel to publish")
    return wheels


# --- uploading ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Upload:
    """What became of one file."""

    name: str
    outcome: Outcome
    detail: str = ""

    def render(self) -> str:
        words = {"uploaded": "uploaded", "exists": "already there", "failed": "FAILED"}
        tail = f": {self.detail}" if self.detail else ""
        return f"  {words[self.outcome]:<13} {self.name}{tail}"


def settings_for(repository: str) -> Settings:
    """twine's settings for ``repository``: a URL, or a section of ~/.pypirc; credentials
    from TWINE_USERNAME/TWINE_PASSWORD, else the section, else the keyring; never a prompt."""
    from twine.exceptions import TwineException
    from twine.settings import Settings

    url = repository if "://" in repository else None
    try:
        settings = Settings(
            repository_url=url,
            repository_name=repository if url is None else "pypi",
            username=os.environ.get("TWINE_USERNAME"),
            password=os.environ.get("TWINE_PASSWORD"),
            non_interactive=True,
            skip_existing=True,
            disable_progress_bar=True,
        )
        settings.check_repository_url()
    except TwineException as exc:
        raise PublishError(f"repository {repository}: {exc}") from None
    return settings


class Notes(logging.Handler):
    """twine's warnings as one redacted line each: it logs a missing keyring entry with its
    traceback, which is no failure of ``publish``."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"note: {redact(record.getMessage())}", file=sys.stderr)


def quiet_twine() -> None:
    log = logging.getLogger("twine")
    if not any(isinstance(h, Notes) for h in log.handlers):
        log.addHandler(Notes(logging.WARNING))
        log.propagate = False


def upload_all(settings: Settings, wheels: Sequence[Path]) -> list[Upload]:
    """Each wheel uploaded alone; a failure is recorded and the next one still tried."""
    from twine.exceptions import TwineException

    quiet_twine()
    try:
        register_secret(settings.password)
        repository = settings.create_repository()
    except TwineException as exc:
        raise PublishError(
            f"no credentials for {shown(settings)}: {exc}",
            hint="set TWINE_USERNAME and TWINE_PASSWORD, give a ~/.pypirc section with "
            "username and password as --repository, or store the password in the keyring",
        ) from None
    try:
        return [upload_one(repository, wheel) for wheel in wheels]
    finally:
        repository.close()


def upload_one(repository: Repository, wheel: Path) -> Upload:
    import requests
    from twine.commands.upload import skip_upload
    from twine.exceptions import TwineException
    from twine.package import PackageFile

    try:
        package = PackageFile.from_filename(str(wheel), None)
        response = repository.upload(package)
    except (TwineException, requests.RequestException, OSError) as exc:
        return Upload(name=wheel.name, outcome="failed", detail=redact(str(exc)))
    if skip_upload(response, True, package):
        return Upload(name=wheel.name, outcome="exists")
    if response.is_redirect or not response.ok:
        status = f"HTTP {response.status_code} {response.reason}".strip()
        return Upload(name=wheel.name, outcome="failed", detail=redact(status))
    return Upload(name=wheel.name, outcome="uploaded")


def shown(settings: Settings) -> str:
    from twine.utils import sanitize_url

    return sanitize_url(str(settings.repository_config["repository"]))


def publish(directory: Path, repository: str) -> list[Upload]:
    """Verify the release, upload each wheel, report each; a failure of any is an error
    naming every file's outcome (running again uploads what is missing)."""
    wheels = verified_wheels(directory)
    settings = settings_for(repository)
    print(f"publish: {len(wheels)} file(s) to {shown(settings)}", file=sys.stderr)
    results = upload_all(settings, wheels)
    report = "\n".join(r.render() for r in results)
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        raise PublishError(
            f"{len(failed)} of {len(results)} file(s) not uploaded to {shown(settings)}:\n{report}",
            hint="check the repository and credentials, then publish again: "
            "files already there are skipped",
        )
    print(report, file=sys.stderr)
    return results
