"""The ``infini-stack`` entry point: parse, dispatch, and the one place errors become exit codes.

An unchanged ``build`` is settled by :mod:`builder.noop` before argparse or any subcommand is
imported, so those imports live inside the functions that need them. ``bin/infini-stack`` may
start the interpreter without ``site`` for that check; anything else runs again with it.
"""

from __future__ import annotations

import os
import sys

from builder import noop

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (and re) at run time
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# The line bin/infini-stack runs (it drops the working directory ``-c`` puts on sys.path).
RUN = "import sys; del sys.path[0]; from builder.noop import main; main()"


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ``argv``, only the subcommand it names is imported and configured."""
    import argparse

    from builder import __version__
    from builder.commands import chosen, load

    parser = argparse.ArgumentParser(
        prog="infini-stack",
        description="Build, package and audit the Infini stack per accelerator vendor.",
    )
    parser.add_argument("--version", action="version", version=f"infini-stack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    names = chosen(list(sys.argv[1:] if argv is None else argv))
    for command in load(names):
        child = sub.add_parser(command.NAME, help=command.HELP, description=command.HELP)
        command.configure(child)
        child.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``infini-stack ARGV`` (``sys.argv`` when None): the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    if (settled := noop.settle(words)) is not None:
        return settled
    return run(words, launched=argv is None)


def run(words: list[str], *, launched: bool = False) -> int:
    """The command line once :mod:`builder.noop` has not settled it; ``launched``: this process
    is the command itself (it may re-run itself with ``site``)."""
    if sys.flags.no_site and launched:  # started for the fast path: the rest needs site
        os.execv(sys.executable, [sys.executable, "-c", RUN, *words])
    from builder.errors import EXIT_INTERNAL, StackError

    args = make_parser(words).parse_args(words)
    args.argv = tuple(words)
    try:
        code: int = args.handler(args)
    except StackError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_INTERNAL
    except OSError as exc:  # a full disk, a read-only or missing directory the user named
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":
    raise SystemExit(main())
