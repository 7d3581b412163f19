"""Libraries that a declared distribution installs where the wheel's RUNPATH leads.

PyQt6's extensions need ``libQt6Core.so.6`` through ``$ORIGIN/Qt6/lib``: the wheel has no file
there, PyQt6-Qt6 (a Requires-Dist) installs them. torchvision's need of ``libcudart.so.12``
arrives through torch, which requires the NVIDIA runtime's distribution. Where such a
distribution is installed on this host, its RECORD says which files it put where: a need not
in the wheel and found so is supplied by it, and named. The distributions searched are the
wheel's Requires-Dist (their markers as on Linux, no extra), then, breadth first, the
requirements of each one installed. Nothing is searched for a need the wheel, the vendor's
policy, the system or the vendor's machine supplies.
"""

from __future__ import annotations

import csv
import posixpath
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from wheels.filename import canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path


@dataclass(frozen=True, slots=True)
class Supplied:
    """A need found in a distribution installed here: its name (as its METADATA spells it),
    the declared requirement it arrives through (itself when declared), and the file's path
    in site-packages."""

    distribution: str
    through: str
    path: str

    def where(self) -> str:
        """As a resolved need names it: ``PyQt6-Qt6: PyQt6/Qt6/lib/libQt6Core.so.6``."""
        via = "" if self.through == self.distribution else f" (through {self.through})"
        return f"{self.distribution}{via}: {self.path}"


@dataclass(frozen=True, slots=True)
class Installed:
    """One distribution's ``.dist-info`` directory on this host."""

    dist_info: Path

    def name(self) -> str:
        for line in self._metadata():
            if line.startswith("Name:"):
                return line[5:].strip()
        return _dist_name(self.dist_info.name)

    def requirements(self) -> list[str]:
        """The names of what it requires on Linux (markers evaluated, extras left out)."""
        from packaging.markers import InvalidMarker, UndefinedComparison
        from packaging.requirements import InvalidRequirement, Requirement

        names: list[str] = []
        env = {"extra": "", "sys_platform": "linux", "platform_system": "Linux"}
        for line in self._metadata():
            if not line.startswith("Requires-Dist:"):
                continue
            try:
                req = Requirement(line[14:].strip())
                if req.marker is None or req.marker.evaluate(env):
                    names.append(canonicalize_name(req.name))
            except (InvalidRequirement, InvalidMarker, UndefinedComparison):
                continue  # (a line pip would not act on either)
        return names

    def files(self) -> frozenset[str]:
        """The paths its RECORD lists, relative to site-packages."""
        try:
            with (self.dist_info / "RECORD").open(encoding="utf-8", newline="") as fh:
                return frozenset(posixpath.normpath(row[0]) for row in csv.reader(fh) if row)
        except (OSError, UnicodeDecodeError, csv.Error):
            return frozenset()

    def _metadata(self) -> list[str]:
        try:
            text = (self.dist_info / "METADATA").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.partition("\n\n")[0].splitlines()


@dataclass
class Suppliers:
    """The distributions installed in ``sites`` (read when first asked), and what each one
    installed."""

    sites: Sequence[Path]
    _files: dict[str, frozenset[str]] = field(default_factory=dict)

    @cached_property
    def installed(self) -> dict[str, Installed]:
        found: dict[str, Installed] = {}
        for site in self.sites:
            try:
                infos = sorted(site.glob("*.dist-info"))
            except OSError:
                continue
            for info in infos:
                name = canonicalize_name(_dist_name(info.name))
                found.setdefault(name, Installed(info))  # (the first on the path wins)
        return found

    def find(self, soname: str, dirs: Iterable[str], declared: Iterable[str]) -> Supplied | None:
        """The distribution, among ``declared`` and what they require (installed), that put
        ``soname`` in one of ``dirs`` (paths in site-packages); None when none did."""
        wanted = [posixpath.join(d, soname) if d else soname for d in dirs]
        queue: list[tuple[str, str]] = [
            (canonicalize_name(d), canonicalize_name(d)) for d in declared
        ]
        seen: set[str] = {name for name, _ in queue}
        while queue:
            name, through = queue.pop(0)
            dist = self.installed.get(name)
            if dist is None:
                continue
            hit = next((p for p in wanted if p in self._files_of(name, dist)), None)
            if hit is not None:
                via = dist.name() if through == name else self.installed[through].name()
                return Supplied(dist.name(), via, hit)
            for req in dist.requirements():
                if req not in seen:
                    seen.add(req)
                    queue.append((req, through))
        return None

    def missing(self, declared: Iterable[str]) -> list[str]:
        """Those of ``declared`` not installed here."""
        return sorted(d for d in declared if canonicalize_name(d) not in self.installed)

    def _files_of(self, name: str, dist: Installed) -> frozenset[str]:
        if name not in self._files:
            self._files[name] = dist.files()
        return self._files[name]


def _dist_name(dist_info: str) -> str:
    """``PyQt6_Qt6`` of ``PyQt6_Qt6-6.12.0.dist-info``."""
    return dist_info.removesuffix(".dist-info").rpartition("-")[0] or dist_info
