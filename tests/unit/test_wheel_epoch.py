"""The wheel's epoch: read from the pinned commits once, the same for both builds of --verify."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.manifest.model import GitSource
from builder.pipeline import wheel

SOURCE = GitSource(url="https://example.invalid/org/x.git", rev="a" * 40)


def fake_git(tmp_path: Path, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = bin_dir / "git"
    git.write_text(f"#!/bin/sh\n{body}\n")
    git.chmod(0o755)


def test_a_commit_time_is_read_past_a_warning_on_the_same_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_git(tmp_path, "echo 'warning: something git says first' >&2; echo 1787298159")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert wheel.commit_time(SOURCE, tmp_path) == 1787298159


def test_no_commit_time_when_git_fails_or_the_cache_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_git(tmp_path, "echo 'fatal: bad revision' >&2; exit 128")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert wheel.commit_time(SOURCE, tmp_path) is None
    assert wheel.commit_time(SOURCE, tmp_path / "absent") is None


def test_the_epoch_is_read_once_and_then_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([1787298159, 315532800])
    monkeypatch.setattr(wheel, "epoch_for", lambda ctx, plan: next(answers))
    epoch = wheel.epoch_once(None, None)  # type: ignore[arg-type]
    assert [epoch(), epoch()] == [1787298159, 1787298159]
