"""Working trees: the wheel's local version segment (wheels.naming), release's refusal."""

from __future__ import annotations

import argparse

import pytest

from builder.commands.common import worktrees_of
from builder.core.errors import UsageError
from wheels.naming import wheel_name, worktree_local


def test_pins_only_leave_the_local_version_alone() -> None:
    assert worktree_local("cu130.torch2.11", None) == "cu130.torch2.11"


def test_uncommitted_changes_say_dirty_and_committed_trees_say_dev() -> None:
    assert worktree_local("cpu", True) == "cpu.dirty"
    assert worktree_local("cpu", False) == "cpu.dev"
    assert worktree_local("", True) == "dirty"


def test_the_segment_is_a_valid_local_version_in_the_wheel_name() -> None:
    name = wheel_name("InfiniLM", "0.1.0", worktree_local("cu130", True))
    assert name.version == "0.1.0+cu130.dirty"


def test_release_refuses_worktrees_unless_allowed() -> None:
    spec = ("miniops=/src/ops",)
    with pytest.raises(UsageError, match="a release is built from the pins"):
        worktrees_of(argparse.Namespace(worktree=list(spec), allow_worktree=False))
    assert worktrees_of(argparse.Namespace(worktree=list(spec), allow_worktree=True)) == spec
    assert worktrees_of(argparse.Namespace(worktree=list(spec))) == spec  # build, wheel, plan
