"""The mini stack's runtime check: the installed engine imports and computes.

Run by ``infini-stack check WHEEL`` in a fresh venv holding the wheel. It imports the engine's
package (which loads the native module and, through it, the runtime, operators and collectives
the wheel bundles), and checks what each layer computes: the compiled-in backends include the
vendor's, an operator adds, and the collective's all-reduce over one rank is the identity. One
JSON line per check; exit status 0 only when all passed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

VENDOR_BACKEND = {"cpu": "cpu", "nvidia": "nvidia", "moore": "moore", "thead": "thead"}


def raises_value_error(call: Callable[[], object]) -> bool:
    try:
        call()
    except ValueError:
        return True
    return False


def main() -> int:
    vendor = os.environ.get("INFINI_STACK_CHECK_VENDOR", "cpu")
    import minicore

    results = {
        "import": minicore.__file__ is not None,
        "vendor": minicore.vendor() == vendor,
        "backends": VENDOR_BACKEND[vendor] in minicore.backends().split(","),
        "add": list(minicore.add([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])) == [11.0, 22.0, 33.0],
        "ops": "add" in minicore.ops(),
        "allreduce": list(minicore.allreduce_sum([1.5, -2.0])) == [1.5, -2.0],
        # std::invalid_argument thrown in libminicore_runtime, caught by pybind11 in _minicore:
        # one C++ runtime on both sides, or the exception is lost.
        "exception": raises_value_error(lambda: minicore.add([1.0], [1.0, 2.0])),
    }
    for name, ok in results.items():
        print(json.dumps({"check": name, "ok": ok}), flush=True)
    print(json.dumps({"check": "summary", "ok": all(results.values())}), flush=True)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
