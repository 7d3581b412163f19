"""The command line: the parser, dispatch, and the one place errors become exit codes.

The parser knows every command by its name and one-line help (:data:`builder.commands.COMMANDS`);
only the command being run is imported and configured, so ``--version``, ``--help`` and a
quick command pay for nothing else. :mod:`builder.__main__` is the entry point that calls
:func:`run` once :mod:`builder.noop` has not settled the command line.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

# The line bin/infini-stack runs (it drops the working directory ``-c`` puts on sys.path).
RUN = "import sys; del sys.path[0]; from builder.__main__ import main; main()"

# Commands that run in the interpreter the launcher started without ``site`` when every module
# named here is found on the path it has (the tool's own site-packages): starting again with
# ``site`` costs 16 ms, a fifth of a small wheel's audit. The fast inflaters are named too:
# where only ``site`` would find them, the audit is worth starting again for.
WITHOUT_SITE = {"audit": ("packaging", "deflate", "zlib_ng")}

# Commands whose plain command lines are read without argparse (``parse_fast``): importing it and
# building the parser took 5.5 ms of a small wheel's 50 ms audit.
QUICK = frozenset({"audit"})

# Options every command that has them takes the same way, accepted before the command too
# (``infini-stack --manifest X build``, as git and cargo take theirs): those that take a value,
# and those that take none.
COMMON_VALUED = frozenset(
    {"--manifest", "-m", "--vendor", "-V", "--home", "--store", "--jobs", "-j", "--mirror"}
    | {"--bundle", "--component", "-c", "--launcher", "--progress", "--worktree"}
)
COMMON_FLAGS = frozenset({"--json", "--strict", "--test", "--no-cache"})


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


def parse_quickly(words: Sequence[str]) -> argparse.Namespace | None:
    """The command line read without argparse, by the commands in :data:`QUICK` (a plain
    command line of their own options; :mod:`builder.core.quickargs`); None: argparse reads it."""
    if not words or words[0] not in QUICK:
        return None
    from builder.commands import load

    command: Any = load(words[0])  # (a command named in QUICK has parse_fast beside run)
    parsed: argparse.Namespace | None = command.parse_fast(words[1:])
    return parsed


def needs_site(words: Sequence[str]) -> bool:
    """Does the command ``words`` name need the interpreter started with ``site``?"""
    command = next((w for w in words if not w.startswith("-")), None)
    modules = WITHOUT_SITE.get(command or "")
    if modules is None:
        return True
    from builder.core.finder import find_spec

    return any(find_spec(name) is None for name in modules)


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
    if words == ["--version"]:  # answered without argparse (or site): it must start fast
        from builder import __version__

        print(f"infini-stack {__version__}")
        return 0
    if sys.flags.no_site and launched and needs_site(words):  # started for the fast path
        os.execv(sys.executable, [sys.executable, "-c", RUN, *words])
    from builder.core.errors import EXIT_INTERNAL, EXIT_OK, StackError

    args = parse_quickly(words) or make_parser(words).parse_args(words)
    args.argv = tuple(words)
    try:
        from builder.core.options import check_options

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
