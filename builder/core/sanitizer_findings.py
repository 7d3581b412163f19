"""Sanitizer reports read back from a step's output: the error kind, where, the top frames.

A report is a failure of the step that printed it, whatever its exit status (a test runner
may swallow one); the run report, ``report`` and the HTML page show the first lines of each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The first line of a report, per sanitizer.
_HEADS = (
    ("address", re.compile(r"==\d+==ERROR: AddressSanitizer: (?P<kind>[\w-]+)")),
    ("leak", re.compile(r"==\d+==ERROR: LeakSanitizer: (?P<kind>[\w ]+?) *$")),
    ("thread", re.compile(r"WARNING: ThreadSanitizer: (?P<kind>[\w -]+?)(?: \(pid=\d+\))? *$")),
    ("undefined", re.compile(r"(?P<where>\S+:\d+:\d+): runtime error: (?P<kind>[^:]+)")),
)
_FRAME = re.compile(r"^\s*#(?P<n>\d+) .*$")
_SUMMARY = re.compile(r"^SUMMARY: \w+Sanitizer: (?P<kind>[\w -]+?) (?P<where>\S+:\d+)")
FRAMES = 4  # the top frames a finding keeps
SCAN = 60  # the lines after a report's first that are read for its frames and summary
MOST = 10  # findings kept per step


@dataclass(frozen=True, slots=True)
class Finding:
    sanitizer: str  # address, undefined, thread, leak
    kind: str  # heap-buffer-overflow, signed integer overflow, data race ...
    where: str  # file:line of the first frame (the SUMMARY's), "" when unknown
    head: str  # the report's first line
    frames: tuple[str, ...]

    def lines(self) -> list[str]:
        """What a person reads first: the kind and where, then the top frames."""
        where = f" at {self.where}" if self.where else ""
        return [f"{self.sanitizer}: {self.kind}{where}", *(f"  {f}" for f in self.frames)]

    def to_json(self) -> dict[str, object]:
        return {
            "sanitizer": self.sanitizer,
            "kind": self.kind,
            "where": self.where,
            "head": self.head,
            "frames": list(self.frames),
        }


QUOTE = "| "  # a child's output line as the runtime check quotes it (children.py CHILD_MARK)


def findings(text: str) -> list[Finding]:
    """Every sanitizer report in ``text``, in order (at most :data:`MOST`), a child's output
    quoted by the runtime check included."""
    lines = [line.removeprefix(QUOTE) for line in text.splitlines()]
    found: list[Finding] = []
    for index, line in enumerate(lines):
        head = _head(line)
        if head is not None:
            found.append(_finding(head, line.strip(), lines[index + 1 : index + 1 + SCAN]))
            if len(found) == MOST:
                break
    return found


def _head(line: str) -> tuple[str, re.Match[str]] | None:
    for sanitizer, pattern in _HEADS:
        match = pattern.search(line)
        if match:
            return sanitizer, match
    return None


def _finding(head: tuple[str, re.Match[str]], first: str, after: list[str]) -> Finding:
    sanitizer, match = head
    frames: list[str] = []
    stack_done = False  # only the first stack (TSan's other access, ASan's allocation follow)
    where = match.groupdict().get("where") or ""
    for line in after:
        if _head(line) is not None:
            break
        summary = _SUMMARY.match(line)
        if summary:
            where = where or summary.group("where")
            break
        if _FRAME.match(line):
            if not stack_done and len(frames) < FRAMES:
                frames.append(line.strip())
        elif frames:
            stack_done = True
    return Finding(sanitizer, match.group("kind").strip(), where, first, tuple(frames))


def summary(found: list[Finding]) -> str:
    """One line per finding, for an error message."""
    return "; ".join(f.lines()[0] for f in found)
