"""The command line: the parser, dispatch, and the one place errors become exit codes.

The parser knows every command by its name and one-line help (:data:`builder.commands.COMMANDS`);
only the command being run is imported and configured, so ``--version``, ``--help`` and a
quick command pay for nothing else. :mod:`builder.__main__` is the entry point that calls
:func:`run` once :mod:`builder.noop` has not settled the command line.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (and re) at run time
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# The line bin/infini-stack runs (it drops the working directory ``-c`` puts on sys.path).
RUN = "import sys; del sys.path[0]; from builder.__main__ import main; main()"

# Commands that run in the interpreter the launcher started without ``site`` when every module
# named here is found on the path it has (the tool's own site-packages): starting again with
# ``site`` costs 16 ms, a fifth of a small wheel's audit. The fast inflaters are named too:
# where only ``site`` would find them, the audit is worth starting again for.
WITHOUT_SITE = {"audit": ("packaging", "deflate", "zlib_ng")}


def make_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the command ``argv`` names (if any) is imported and configured."""
    import argparse
    import functools

    from builder import __version__
    from builder.commands import COMMANDS, load

    formatter = functools.partial(argparse.HelpFormatter, width=help_width())
    parser = argparse.ArgumentParser(
        prog="infini-stack",
        description="Build, package and audit the Infini stack per accelerator vendor.",
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"infini-stack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    # A known command is parsed by its own subparser alone (the others cost 4 ms to add); help,
    # a typo or no command at all gets every name.
    before = argv[: list(argv).index(chosen)] if chosen is not None else argv
    alone = chosen in COMMANDS and not {"-h", "--help"} & set(before)
    names = [chosen] if alone and chosen is not None else list(COMMANDS)
    for name in names:
        help_text = COMMANDS[name]
        child = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=formatter
        )
        if name == chosen:
            command = load(name)
            command.configure(child)
            child.set_defaults(handler=command.run)
    return parser


def help_width() -> int:
    """The width argparse's help formatter takes by default (the terminal's columns, as
    ``shutil.get_terminal_size`` finds them, less 2), without importing shutil: every
    ``add_argument`` makes a formatter, and shutil imports bz2 and lzma, 3 ms of a small audit."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def main(argv: Sequence[str] | None = None) -> int:
    """``infini-stack ARGV`` in this process (``sys.argv`` when None): the exit status."""
    from builder import noop

    words = list(sys.argv[1:] if argv is None else argv)
    if (settled := noop.settle(words)) is not None:
        return settled
    return run(words)


def needs_site(words: Sequence[str]) -> bool:
    """Does the command ``words`` name need the interpreter started with ``site``?"""
    command = next((w for w in words if not w.startswith("-")), None)
    modules = WITHOUT_SITE.get(command or "")
    if modules is None:
        return True
    from importlib.machinery import PathFinder

    return any(PathFinder.find_spec(name) is None for name in modules)


def run(words: list[str], *, launched: bool = False) -> int:
    """The command line once :mod:`builder.noop` has not settled it; ``launched``: this process
    is the command itself (it may re-run itself with ``site``)."""
    if words == ["--version"]:  # answered without argparse (or site): it must start fast
        from builder import __version__

        print(f"infini-stack {__version__}")
        return 0
    if sys.flags.no_site and launched and needs_site(words):  # started for the fast path
        os.execv(sys.executable, [sys.executable, "-c", RUN, *words])
    from builder.core.errors import EXIT_INTERNAL, StackError

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
