"""The one entry point: ``python -m builder`` and the installed ``infini-stack`` launcher.

An unchanged ``build`` is settled by :mod:`builder.noop` before anything else is imported;
every other command line goes to :func:`builder.cli.run`. This module imports only ``sys`` and
:mod:`builder.noop` at its top: ``bin/infini-stack`` may start the interpreter without ``site``
for that check.
"""

import sys

from builder import noop


def main() -> None:
    argv = sys.argv[1:]
    code = noop.settle(argv)
    if code is None:
        from builder.cli import run

        code = run(argv, launched=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
