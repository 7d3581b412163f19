"""The one entry point: ``python -m builder`` and the installed ``infini-stack`` launcher.

An unchanged ``build`` is settled by :mod:`builder.noop` before anything else is imported;
every other command line goes to :func:`builder.cli.run`. This module imports only ``os``, ``sys``
and :mod:`builder.noop` at its top: ``bin/infini-stack`` may start the interpreter without ``site``
for that check.
"""

import os
import sys

from builder import noop


def main() -> None:
    argv = sys.argv[1:]
    code = noop.settle(argv)
    if code is None:
        from builder.cli import run

        code = run(argv, launched=True)
    if argv[:1] == ["audit"]:  # (its files are closed, its child processes joined)
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """Exit without finalizing the interpreter: an audit of a big wheel leaves millions of
    objects (its ELF files' symbol sets) that nothing needs freed one by one."""
    import contextlib

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
