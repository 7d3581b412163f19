"""The command line: the parser, dispatch, and the one place errors become exit codes.

The parser knows every command by its name and one-line help (:data:`builder.commands.COMMANDS`);
only the command being run is imported and configured, so ``--version``, ``--help`` and a
quick command pay for nothing else. :mod:`builder.__main__` is the entry point that calls
:func:`run` once :mod:`builder.noop` has not settled the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from builder import __version__
from builder.commands import COMMANDS, load
from builder.core.errors import EXIT_INTERNAL, EXIT_OK, StackError
from builder.core.options import check_options

# The line bin/infini-stack runs (it drops the working directory ``-c`` puts on sys.path).
RUN = "import sys; del sys.path[0]; from builder.__main__ import main; main()"

# Options every command that has them takes the same way, accepted before the command too
# (``infini-stack --manifest X build``, as git and cargo take theirs): those that take a value,
# and those that take none.
COMMON_VALUED = frozenset(
    {"--manifest", "-m", "--vendor", "-V", "--home", "--store", "--jobs", "-j", "--mirror"}
    | {"--bundle", "--component", "-c", "--launcher", "--progress", "--worktree"}
)
COMMON_FLAGS = frozenset({"--json", "--strict", "--test", "--no-cache"})


class VersionAction(argparse.Action):
    """``--version``: the tool's version, and which library inflates a wheel's members."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        print(version_text())
        parser.exit()


def version_text() -> str:
    """``infini-stack X.Y.Z`` and the audit's inflaters, one way of inflating per entry."""
    from wheels.inflate import libraries

    ways = ", ".join(f"{way}: {library}" for way, library in libraries().items())
    return f"infini-stack {__version__}\ninflaters: {ways}"


def make_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser: every command by name, and the one ``argv`` names (if any) imported and
    configured (a command's module imports what it needs, which may be heavy)."""
    parser = argparse.ArgumentParser(
        prog="infini-stack",
        description="Build, package and audit the Infini stack per accelerator vendor.",
    )
    parser.add_argument("--version", action=VersionAction, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, help_text in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            command = load(name)
            command.configure(child)
            child.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``infini-stack ARGV`` in this process (``sys.argv`` when None): the exit status."""
    from builder import noop

    words = list(sys.argv[1:] if argv is None else argv)
    if (settled := noop.settle(words)) is not None:
        return settled
    return run(words)


def common_first(words: Sequence[str]) -> list[str]:
    """``words`` with the common options written before the command moved after it:
    ``--manifest X build --vendor cpu`` is ``build --manifest X --vendor cpu``."""
    moved: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-"):
        name, _, value = words[i].partition("=")
        if name in COMMON_VALUED and not value and i + 1 < len(words):
            moved += words[i : i + 2]
            i += 2
        elif name in COMMON_VALUED or name in COMMON_FLAGS:
            moved.append(words[i])
            i += 1
        else:
            break
    if not moved or i >= len(words):
        return list(words)
    return [words[i], *moved, *words[i + 1 :]]


def run(words: list[str], *, launched: bool = False) -> int:
    """The command line once :mod:`builder.noop` has not settled it; ``launched``: this process
    is the command itself (it may re-run itself with ``site``)."""
    words = common_first(words)
    if sys.flags.no_site and launched:
        # The launcher starts ``build`` without ``site`` (builder/noop.py):
        # a build that is not settled runs again with it.
        os.execv(sys.executable, [sys.executable, "-c", RUN, *words])
    try:
        args = make_parser(words).parse_args(words)  # --version and --help print here
        args.argv = tuple(words)
        check_options(args)  # every path option, before any work starts
        code: int = args.handler(args)
    except StackError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        quiet_stdout()
        return EXIT_OK
    except OSError as exc:  # a full disk, a read-only or missing directory the user named
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_INTERNAL
    return code


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so that flushing it at exit raises no second
    BrokenPipeError (Python would print "Exception ignored ...")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
