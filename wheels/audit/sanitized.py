"""A sanitized wheel (``wheel --sanitize``: ``+cpu.asan``, ``+cu130.tsan``): its libraries need
the sanitizer's runtime, which the machine has and which is loaded first (``LD_PRELOAD``); the
audit names it, and says the wheel is for local testing only."""

from __future__ import annotations

import os

from wheels.audit.findings import Findings
from wheels.naming import sanitizer_of_wheel
from wheels.policy import VendorPolicy


def sanitized_policy(path: str, policy: VendorPolicy, findings: Findings) -> VendorPolicy:
    """``policy`` with the runtimes of the sanitizers the wheel's name says it was built with
    expected from the machine (a warning names them); ``policy`` itself for a plain wheel."""
    spec = sanitizer_of_wheel(os.path.basename(path))
    if spec is None:
        return policy
    from builder.core.sanitize import RUNTIMES  # (only for a sanitized wheel: dataclasses)

    runtimes = tuple(f"{RUNTIMES[s]}.*" for s in spec.split(","))
    findings.warning(
        "sanitized",
        None,
        f"built with -fsanitize={spec}: needs the sanitizer runtime "
        f"{', '.join(r.removesuffix('.*') for r in runtimes)} of the compiler that built it, "
        "loaded first (LD_PRELOAD; smoke and check do so); for local testing only, never "
        "released",
    )
    return VendorPolicy(
        name=policy.name,
        external=(*policy.external, *runtimes),
        distributions=policy.distributions,
        aliases=policy.aliases,
        local=policy.local,
        variant=policy.variant,
    )
