"""The ``infini-stack`` entry point: parse, dispatch, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from builder import __version__
from builder.commands import chosen, load
from builder.errors import EXIT_INTERNAL, StackError


def make_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ``argv``, only the subcommand it names is imported and configured."""
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
    parser = make_parser(argv)
    args = parser.parse_args(argv)
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
