"""The mini stack's runtime check: the installed engine imports and computes.

Run by ``infini-stack check WHEEL`` in a fresh venv holding the wheel. Each case runs in a child
process of this script (``children.py``, the real stack's own, beside it), the children side by
side as the real checks run theirs: a child that crashes is a reported failure, not the end of
the check. The cases import the engine's package (which loads the native module and, through it,
the runtime, operators and collectives the wheel bundles) and check what each layer computes:
the compiled-in backends include the vendor's, an operator adds, and the collective's all-reduce
over one rank is the identity. One JSON line per case, in a fixed order; exit status 0 only when
all passed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import children  # beside this script

VENDOR_BACKEND = {"cpu": "cpu", "nvidia": "nvidia", "moore": "moore", "thead": "thead"}
CHILD_TIMEOUT = 120.0
CHILD_MEMORY = 256 << 20  # bytes a child is given room for


def raises_value_error(call: Callable[[], object]) -> bool:
    try:
        call()
    except ValueError:
        return True
    return False


def case(spec: dict[str, Any], result: Callable[[dict[str, Any]], None]) -> None:
    """One case, in a child: whether it holds."""
    import minicore

    vendor = os.environ.get("INFINI_STACK_CHECK_VENDOR", "cpu")
    cases: dict[str, Callable[[], bool]] = {
        "import": lambda: minicore.__file__ is not None,
        "vendor": lambda: minicore.vendor() == vendor,
        "backends": lambda: VENDOR_BACKEND[vendor] in minicore.backends().split(","),
        "add": lambda: (
            list(minicore.add([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])) == [11.0, 22.0, 33.0]
        ),
        "ops": lambda: "add" in minicore.ops(),
        "allreduce": lambda: list(minicore.allreduce_sum([1.5, -2.0])) == [1.5, -2.0],
        # std::invalid_argument thrown in libminicore_runtime, caught by pybind11 in _minicore:
        # one C++ runtime on both sides, or the exception is lost.
        "exception": lambda: raises_value_error(lambda: minicore.add([1.0], [1.0, 2.0])),
    }
    result({"holds": cases[spec["case"]]()})


CASES = ("import", "vendor", "backends", "add", "ops", "allreduce", "exception")


def check(name: str) -> None:
    script = str(Path(__file__).resolve())
    got = children.run_child(script, "case", {"case": name}, timeout=CHILD_TIMEOUT)
    keys = ("outcome", "exception", "message", "stderr_tail")
    why = {k: got[k] for k in keys if k in got and got[k] != "ok"}
    children.emit(name, got.get("holds") is True, **why)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        return children.serve({"case": case}, sys.argv[2], json.loads(sys.argv[3]))
    children.pool(children.jobs_for(device_bytes=None, child_bytes=CHILD_MEMORY))
    children.side_by_side(*(partial(check, name) for name in CASES))
    ok = not children.FAILED
    summary = {"check": "summary", "ok": ok, "failed": children.FAILED}
    print(json.dumps({**summary, **children.timeline()}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
