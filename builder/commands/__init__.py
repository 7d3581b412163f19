"""The subcommands: one module each, with ``configure(parser)`` and ``run(args) -> int``.

The parser is built from :data:`COMMANDS` alone (names and one-line help); a command's module is
imported only when it is the one being run, so ``--version``, ``--help`` and a quick command
pay for nothing else. Add a subcommand by writing its module and naming it here.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from typing import Protocol

    class Command(Protocol):
        def configure(self, parser: argparse.ArgumentParser) -> None: ...

        def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: dict[str, str] = {
    "validate": "check stack.yaml and the component recipes (every problem, located)",
    "plan": "print the configure/build/test/install commands build would run, in order",
    "preflight": "check, in seconds, that this host has what a vendor's build (or run) needs",
    "fetch": "fetch and verify the pinned sources (shared bare cache, one checkout per build)",
    "build": "build the stack for a vendor in dependency order (store hits cost nothing)",
    "presets": "write CMakePresets.json and build.sh that build one component as the tool does",
    "report": "print the last build's run report",
    "cache": "the remote cache of store entries: `cache keygen` makes a signing key",
    "store": "the store: `store verify [--repair]` checks each entry against its install manifest",
    "gc": "remove store entries, build dirs, source trees and logs that no manifest uses",
    "wheel": "build the stack, then package and audit the vendor's wheel into dist/",
    "audit": (
        "audit wheels: each ELF's needs and where they resolve, RUNPATH, libpython, symbols, "
        "RECORD and platform tag (exit 6 on any violation)"
    ),
    "bundle": "write every pinned source of a vendor's stack (with submodules) into one file",
    "lock": (
        "pin COMPONENT=REF (a branch or tag) to its SHA in stack.yaml; --from infinicore=REF "
        "takes InfiniCore's gitlinks as the contract; --check reports drift"
    ),
    "ci": "CI support: `ci matrix` prints the vendor x Python job matrix as JSON",
    "sbom": "write a CycloneDX SBOM (JSON) of the vendor's stack as built",
    "inspect": "print the stack-manifest.json a wheel carries: what it was built from",
    "check": "run the vendor's runtime check (stack.yaml vendors.V.check) against a built wheel",
    "smoke": "install a wheel into a fresh venv and import every extension with RTLD_NOW binding",
    "release": (
        "preflight, build, reproducible wheel, audit, smoke, SBOM and SHA256SUMS into a "
        "directory, or nothing"
    ),
    "publish": "upload a release (its SHA256SUMS checked first) to a PyPI-compatible repository",
}


def load(name: str) -> Command:
    full = f"builder.commands.{name}"
    __import__(full)  # (importlib.import_module: importlib and warnings, for one name)
    module: Command = sys.modules[full]
    return module
