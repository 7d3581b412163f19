"""The one way this project runs another program.

Resolve the program first, echo ``+ cmd``, pass env/cwd/timeout explicitly, send output to a log
file or capture it, and turn a failure into :class:`CommandFailed` holding the tail of the output.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from builder.core.errors import EXIT_BUILD, CommandFailed, StackError
from builder.core.redact import redact

TAIL_LINES = 40


@dataclass(frozen=True, kw_only=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    output: str
    seconds: float


class Children:
    """The child processes a caller has running, so an interrupt can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[str]] = set()

    def add(self, p: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.add(p)

    def discard(self, p: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.discard(p)

    def terminate_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            terminate(p)


def which(program: str, path: str | None = None) -> str | None:
    """Absolute path of ``program`` on PATH (or as given when it contains a slash)."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) and Path(program).is_file() else None
    return shutil.which(program, path=path)


def quote(argv: Sequence[str]) -> str:
    """The command line as a shell would take it, credentials of its URLs redacted: what is
    echoed, logged and put in error messages."""
    return redact(" ".join(shlex.quote(str(a)) for a in argv))


def _resolve(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    if not argv:
        raise StackError("internal: empty command")
    found = which(str(argv[0]), (env or os.environ).get("PATH"))
    if found is None:
        raise StackError(
            f"program not found: {argv[0]}",
            hint=f"install {argv[0]} or put it on PATH",
        )
    return [found, *(str(a) for a in argv[1:])]


def run(
    argv: Sequence[str],
    *,
    what: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    timeout: float | None = None,
    check: bool = True,
    echo: IO[str] | None = None,
    exit_code: int = EXIT_BUILD,
    children: Children | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Result:
    """Run ``argv``; output goes to ``log`` (appended) when given, else it is captured;
    ``on_line`` sees each line as it comes (a compile's progress).

    The child gets its own process group so that an interrupt stops everything it started.
    """
    resolved = _resolve(argv, env)
    if echo is not None:
        print(f"+ {quote(argv)}", file=echo, flush=True)
    start = time.monotonic()
    try:
        with _log_sink(log, argv, cwd) as sink:
            ran = _communicate(resolved, cwd, env, sink, timeout, children, on_line)
    except OSError as exc:
        raise StackError(f"cannot run {quote(argv)}: {exc}") from exc
    if check and ran.returncode != 0:
        what = what or Path(resolved[0]).name
        raise CommandFailed(
            f"{what} (timed out after {timeout:g}s)" if ran.timed_out else what,
            argv,
            ran.returncode,
            "\n".join(ran.tail),
            log,
            exit_code=exit_code,
        )
    seconds = time.monotonic() - start
    return Result(argv=tuple(argv), returncode=ran.returncode, output=ran.output, seconds=seconds)


@dataclass(frozen=True)
class _Ran:
    returncode: int
    output: str  # empty when it went to a log
    tail: tuple[str, ...]
    timed_out: bool


@contextlib.contextmanager
def _log_sink(log: Path | None, argv: Sequence[str], cwd: Path | None) -> Iterator[IO[str] | None]:
    """The log, opened for appending with the command line first (None: capture instead)."""
    if log is None:
        yield None
        return
    with log.open("a", encoding="utf-8", errors="replace") as sink:
        sink.write(f"+ {quote(argv)}\n")
        if cwd is not None:
            sink.write(f"  (in {cwd})\n")
        sink.flush()
        yield sink


def _communicate(
    resolved: list[str],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    sink: IO[str] | None,
    timeout: float | None,
    children: Children | None,
    on_line: Callable[[str], None] | None = None,
) -> _Ran:
    """Start the child in a session of its own, stream its output to ``sink`` (or capture it)
    keeping the last lines, and wait; a timeout or an interrupt stops it."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    captured: list[str] = []
    timed_out = threading.Event()
    proc = subprocess.Popen(
        resolved,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    if children is not None:
        children.add(proc)
    watchdog = _watchdog(proc, timeout, timed_out)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = redact(raw) if sink is not None else raw  # a log gets it redacted
            (sink.write if sink is not None else captured.append)(line)
            tail.append(redact(line.rstrip("\n")))
            if on_line is not None:
                on_line(raw)
        returncode = proc.wait()
    except BaseException:
        terminate(proc)
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
        if children is not None:
            children.discard(proc)
    return _Ran(returncode, "".join(captured), tuple(tail), timed_out.is_set())


def capture(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 60,
    check: bool = True,
    exit_code: int = EXIT_BUILD,
) -> str:
    """Run a short query command and return its combined output."""
    return run(argv, cwd=cwd, env=env, timeout=timeout, check=check, exit_code=exit_code).output


def _watchdog(
    proc: subprocess.Popen[str], timeout: float | None, timed_out: threading.Event
) -> threading.Timer | None:
    """Stop ``proc`` after ``timeout`` seconds, also while its output is still being read."""
    if not timeout:
        return None

    def expire() -> None:
        if proc.poll() is None:
            timed_out.set()
            terminate(proc)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    return timer


def terminate(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    """Stop ``proc`` and its process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def stderr_echo() -> IO[str]:
    return sys.stderr
