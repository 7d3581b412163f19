"""What packaging a wheel leaves: the wheel with its inputs, its SBOM finisher, its audit.

Shared by the wheel, its variant (:mod:`builder.pipeline.variant`) and the release gate.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import AuditError
from builder.plan import Plan
from wheels.assemble import Finisher, WheelInputs


@dataclass(frozen=True)
class Built:
    path: Path
    inputs: WheelInputs
    requires: tuple[str, ...]  # Requires-Dist added for libraries other distributions supply


def sbom_finisher(plan: Plan, inputs: WheelInputs) -> Finisher | None:
    """Puts the SBOM of exactly what was staged into ``.dist-info/sboms/`` (PEP 770), and the
    build's ``stack-manifest.json`` (builder.pipeline.build_manifest) into ``.dist-info``."""
    from builder.pipeline import build_manifest, sbom

    manifest = {
        build_manifest.NAME: build_manifest.render(
            plan, wheel=inputs.name.filename, tool=inputs.generator
        )
    }
    if not sbom.available():
        print(f"warning: no SBOM in the wheel: {sbom.INSTALL_HINT}", file=sys.stderr)
        return lambda _root, _requires: manifest

    def finish(root: Path, requires: list[str]) -> dict[str, bytes]:
        return {sbom.SBOM_PATH: sbom.document(plan, inputs, root, requires).encode(), **manifest}

    return finish


def audit_or_keep(
    wheel: Path,
    vendor: str,
    keep_dir: Path,
    cuda_architectures: tuple[str, ...] = (),
    max_size: int | None = None,
) -> None:
    """Audit ``wheel`` (its device code against ``cuda_architectures``, its size against
    ``max_size``); a wheel that fails is kept in ``keep_dir``/rejected, and the audit's report
    is the error. A size warning (over PyPI's limit, no max_size given) is printed."""
    from wheels.audit import audit_wheel
    from wheels.audit_report import render_text
    from wheels.policy import load_vendor_policy

    result = audit_wheel(
        wheel,
        load_vendor_policy(vendor),
        cuda_architectures=cuda_architectures,
        max_size=max_size,
    )
    for warning in result.warnings:
        if warning.code == "wheel-size":
            print(f"warning: {wheel.name}: {warning.message}", file=sys.stderr)
    if not result.ok:
        # Kept under its own name (installable for inspection), in a folder that says why.
        rejected = keep_dir / "rejected"
        rejected.mkdir(parents=True, exist_ok=True)
        kept = rejected / wheel.name
        shutil.copyfile(wheel, kept)
        raise AuditError(
            render_text([result]) + f"\nthe wheel failed its audit; it was kept at {kept}",
        )
