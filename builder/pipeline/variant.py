"""The PEP 825 variant wheel of a vendor's wheel, written beside it.

The variant wheel carries the audited wheel's payload byte for byte, under the public version
(``0.1.0``, no local part) and the vendor's variant label (``cu130``; ``null`` for cpu), with
``.dist-info/variant.json`` saying what was built: the toolkit's version as a lower bound and
the architectures, read from the payload's ELF files where the vendor's data says so
(:mod:`wheels.variants`). Its dist-info is made again (METADATA, WHEEL, the SBOM, RECORD), and
it is audited like any wheel, variant checks included.

Beside, not instead: installers without PEP 825 support reject a file name with a variant label
(PEP 825 "Backwards Compatibility"), so the local-version wheel stays the one pip installs, the
one the smoke test and the runtime check install, and the one ``--verify`` and ``--repair``
start from; the variant wheel is made from it, so the two never differ in what they install.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.pipeline.built import Built, audit_or_keep, sbom_finisher
from builder.pipeline.context import Context
from builder.plan import Plan
from wheels import variants
from wheels.assemble import pack
from wheels.naming import VARIANT_FILE, variant_label, wheel_name
from wheels.policy import load_vendor_policy


def wanted(ctx: Context, asked: bool) -> bool:
    """``--variant`` on the command line, or ``wheel.variant: true`` in stack.yaml."""
    spec = ctx.stack.wheel
    return asked or bool(spec is not None and spec.variant)


def variant_of(ctx: Context, plan: Plan, built: Built, dest: Path) -> Built:
    """The variant wheel of ``built`` in ``dest``, audited (kept aside when it fails)."""
    from wheels import repair

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="infini-variant-") as tmp:
        root = Path(tmp)
        repair.unpack_payload(built.path, root)
        doc = _document(ctx, root)
        spec = built.inputs.spec
        name = dataclasses.replace(
            wheel_name(
                spec.name,
                spec.version,
                "",
                platform=built.inputs.name.platform_tag,
                python=ctx.host.python_version,
            ),
            variant=next(iter(doc["variants"])),
        )
        inputs = dataclasses.replace(built.inputs, name=name, extra_files=None)
        extra = {VARIANT_FILE: variants.dumps(doc)}
        finish = sbom_finisher(plan, inputs)
        if finish is not None:
            extra.update(finish(root, list(built.requires)))
        inputs = dataclasses.replace(inputs, extra_files=extra)
        wheel = pack(root, inputs, list(built.requires), dest / name.filename)
    from builder.vendors import get as get_vendor

    archs = get_vendor(ctx.vendor).architectures(ctx.stack.vendors[ctx.vendor].settings)
    audit_or_keep(wheel, ctx.vendor, ctx.layout.home / "wheels", archs, spec.max_size)
    return Built(path=wheel, inputs=inputs, requires=built.requires)


def _document(ctx: Context, root: Path) -> dict[str, Any]:
    """variant.json for the payload staged under ``root``."""
    from builder.vendors import get as get_vendor

    policy = load_vendor_policy(ctx.vendor).variant
    settings = ctx.stack.vendors[ctx.vendor].settings
    toolkit = ctx.host.toolkit
    try:
        props = variants.properties_of(
            policy,
            toolkit_version=toolkit.version if toolkit and toolkit.found else None,
            architectures=get_vendor(ctx.vendor).architectures(settings),
            device_code=variants.staged_device_code(root),
        )
        local = get_vendor(ctx.vendor).local_version(ctx.host, settings)
        label = variant_label(local, has_properties=bool(props))
        namespaces, providers = variants.stack_metadata(ctx.stack.vendors)
        if not namespaces:
            raise variants.VariantError(
                "no vendor of the stack has a variant namespace (wheels/policy/vendors.json), "
                "and PEP 825 needs at least one"
            )
        return variants.document(label, props, namespaces, providers)
    except (variants.VariantError, ValueError) as exc:
        raise UsageError(
            f"no variant wheel for {ctx.vendor}: {exc}",
            hint="drop --variant (and wheel.variant) or fix the vendor's variant data",
        ) from None


def verify(ctx: Context, plan: Plan, first: Built, second_wheel: Built, work: Path) -> None:
    """The variant of the second, fresh build's wheel must be the same bytes as the first's."""
    from builder.pipeline.reproduce import require_identical

    again = variant_of(ctx, plan, second_wheel, work / "variant-again")
    require_identical(
        first.path,
        again.path,
        hint="the variant metadata depends on something besides what was built",
    )
    print(f"verify: {first.path.name}: two builds are byte-identical", file=sys.stderr)


def write_index(out: Path, ctx: Context) -> Path | None:
    """``{name}-{version}-variants.json`` over the variant wheels now in ``out``."""
    spec = ctx.stack.wheel
    assert spec is not None
    try:
        return variants.write_index(out, spec.name, spec.version)
    except (variants.VariantError, ValueError, KeyError) as exc:
        raise UsageError(
            f"the variant wheels in {out} do not combine into one index file: {exc}",
            hint="their variant metadata disagree: were they built from different stacks?",
        ) from None
