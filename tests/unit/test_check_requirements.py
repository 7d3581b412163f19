"""The wheel's runtime requirements held against a target interpreter's installed versions."""

from __future__ import annotations

import sys

from packaging.requirements import Requirement

from builder.checks.requirements import Unmet, missing, pip_line, unmet

ENV = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"}


def test_a_requirement_not_installed_or_outside_its_specifier_is_unmet() -> None:
    parsed = [Requirement(r) for r in ("janus", "torch>=2.11,<2.12", "numpy", "tqdm>=4")]
    installed = {"janus": None, "torch": "2.10.0", "numpy": "2.1.0", "tqdm": "4.66.0"}
    assert missing(parsed, installed, ENV) == [
        Unmet("janus", None),
        Unmet("torch<2.12,>=2.11", "2.10.0"),
    ]


def test_a_requirement_whose_marker_does_not_apply_is_not_asked_for() -> None:
    parsed = [
        Requirement('pywin32; sys_platform == "win32"'),
        Requirement('tomli; python_version < "3.11"'),
    ]
    assert missing(parsed, {"pywin32": None, "tomli": None}, ENV) == []


def test_the_pip_line_quotes_each_requirement_for_the_shell() -> None:
    line = pip_line("/opt/my python/bin/python3", [Unmet("torch<2.12,>=2.11", "2.10.0")])
    assert line == "'/opt/my python/bin/python3' -m pip install 'torch<2.12,>=2.11'"
    assert Unmet("janus", None).render() == "janus (not installed)"
    assert Unmet("torch>=3", "2.1").render() == "torch>=3 (2.1 is installed)"


def test_the_target_interpreter_is_asked_what_it_has() -> None:
    found = unmet(["packaging>=1", "infini-stack-absent-dist", "pytest>=9999"], sys.executable)
    assert [u.requirement for u in found] == ["infini-stack-absent-dist", "pytest>=9999"]
    assert found[1].found is not None
