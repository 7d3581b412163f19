"""``<recipes>/sanitizers/suppressions.yaml``: upstream findings a sanitized run goes on past.

A finding that blocks the rest of a run (a report in one upstream test stops every later one)
may be listed here, each with why and the upstream file and line, so that the run goes on;
nothing is suppressed without saying so (docs/sanitizers.md).
"""

from __future__ import annotations

from pathlib import Path

from builder.core.sanitize import SUPPRESSION_VARS, Suppression
from builder.manifest.schema import Problems, Reader, load_doc, unknown_message

FILE = Path("sanitizers") / "suppressions.yaml"
KEYS = ("sanitizer", "kind", "match", "upstream", "reason")


def read_suppressions(recipes_dir: Path, problems: Problems) -> tuple[Suppression, ...]:
    """Every entry of the recipes' suppressions file (none when there is no such file)."""
    path = recipes_dir / FILE
    if not path.is_file():
        return ()
    doc = load_doc(path, problems)
    if doc is None:
        return ()
    r = Reader(doc, problems)
    r.check_keys((), ("suppressions",))
    raw = r.get(("suppressions",))
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.error(("suppressions",), "must be a list of entries")
        return ()
    found = (_entry(r, i) for i in range(len(raw)))
    return tuple(s for s in found if s is not None)


def _entry(r: Reader, index: int) -> Suppression | None:
    key = ("suppressions", index)
    r.mapping(key)
    r.check_keys(key, KEYS)
    values = {name: r.string((*key, name), required=True) for name in KEYS}
    sanitizer = values["sanitizer"]
    if sanitizer is not None and sanitizer not in SUPPRESSION_VARS:
        r.error((*key, "sanitizer"), unknown_message("sanitizer", sanitizer, SUPPRESSION_VARS))
        return None
    if any(v is None or not v.strip() for v in values.values()):
        return None  # (each missing one reported by the reader)
    return Suppression(**{k: v for k, v in values.items() if v is not None})
