"""Reproduce one component's build by hand: CMakePresets.json and a shell script, from its plan.

Both configure exactly as ``build`` does (same source, generator, cache variables, environment
and compiler launcher), with dependencies taken from their store entries, but into a build and
install directory of their own: a hand build never touches the tool's build directories or the
store.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.redact import redact, redact_data
from builder.plan import ComponentPlan, launcher_defines


@dataclass(frozen=True, kw_only=True)
class HandBuild:
    component: ComponentPlan
    out: Path  # where the presets, the script, build/ and install/ go
    jobs: int
    launcher: str | None = None

    @property
    def name(self) -> str:
        return f"{self.component.name}-{self.component.vendor}"

    @property
    def build_dir(self) -> Path:
        return self.out / "build"

    @property
    def install_dir(self) -> Path:
        return self.out / "install"

    def cache_variables(self) -> dict[str, str]:
        defines = dict(self.component.defines)
        if self.component.test is not None:  # --test: one build with the test's options
            defines.update(self.component.test.options)
        defines["CMAKE_INSTALL_PREFIX"] = str(self.install_dir)
        if self.launcher:
            defines.update(launcher_defines(self.launcher))
        return defines

    def test_command(self) -> tuple[str, ...] | None:
        test = self.component.test
        return test.command if test is not None and test.command else None

    def commands(self) -> list[tuple[tuple[str, ...], Path | None]]:
        """The commands in order, each with the directory it runs in (None: anywhere)."""
        c = self.component
        configure = (
            "cmake",
            "-S",
            str(c.cmake_source),
            "-B",
            str(self.build_dir),
            "-G",
            "Ninja",
            *(f"-D{k}={v}" for k, v in self.cache_variables().items()),
        )
        build = ("cmake", "--build", str(self.build_dir), "--parallel", str(self.jobs))
        out: list[tuple[tuple[str, ...], Path | None]] = [(configure, None), (build, None)]
        if test := self.test_command():
            out.append((test, self.build_dir))
        out.append((("cmake", "--install", str(self.build_dir)), None))
        return out


def presets(hand: HandBuild) -> dict[str, Any]:
    """CMakePresets.json (schema 3, CMake >= 3.21) for ``hand``."""
    c = hand.component
    configure: dict[str, Any] = {
        "name": hand.name,
        "displayName": f"{c.name} ({c.vendor}), as infini-stack builds it",
        "description": f"store key {c.key}; dependencies from the store",
        "generator": "Ninja",
        "binaryDir": str(hand.build_dir),
        "installDir": str(hand.install_dir),
        "cacheVariables": hand.cache_variables(),
    }
    if c.env:
        configure["environment"] = dict(c.env)
    data: dict[str, Any] = {
        "version": 3,
        "cmakeMinimumRequired": {"major": 3, "minor": 21, "patch": 0},
        "configurePresets": [configure],
        "buildPresets": [{"name": hand.name, "configurePreset": hand.name, "jobs": hand.jobs}],
        "vendor": {
            "infini-stack": {
                "component": c.name,
                "vendor": c.vendor,
                "key": c.key,
                "source": str(c.cmake_source),
            }
        },
    }
    if hand.test_command():
        data["testPresets"] = [
            {"name": hand.name, "configurePreset": hand.name, "output": {"outputOnFailure": True}}
        ]
    return data


def script(hand: HandBuild) -> str:
    """A POSIX shell script running the exact commands, with the environment they need."""
    c = hand.component
    lines = [
        "#!/bin/sh",
        f"# {c.name} for {c.vendor} as infini-stack builds it (store key {c.key}),",
        "# into a build and install directory of its own. Dependencies come from the store.",
        "set -ex",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in c.env.items()]
    for argv, cwd in hand.commands():
        command = _wrap(argv)
        lines.append(f"(cd {shlex.quote(str(cwd))} && {command})" if cwd else command)
    return "\n".join(lines) + "\n"


def _wrap(argv: tuple[str, ...]) -> str:
    """One line, or for configure one line per cache variable."""
    words = [shlex.quote(a) for a in argv]
    first = next((i for i, a in enumerate(argv) if a.startswith("-D")), len(argv))
    return " \\\n    ".join([" ".join(words[:first]), *words[first:]])


def write(hand: HandBuild) -> tuple[Path, Path]:
    hand.out.mkdir(parents=True, exist_ok=True)
    preset_file = hand.out / "CMakePresets.json"
    document = json.dumps(redact_data(presets(hand)), indent=2) + "\n"
    preset_file.write_text(document, encoding="utf-8")
    script_file = hand.out / "build.sh"
    script_file.write_text(redact(script(hand)), encoding="utf-8")
    script_file.chmod(0o755)
    return preset_file, script_file
