"""The store proves its contents where it matters: before a wheel is assembled from it, before
an entry is pushed, and on demand (``infini-stack store verify``).

Each entry's prefix is hashed and compared with its install manifest
(:mod:`builder.core.contents`). A changed entry is named with its component and every path
that differs, and treated as absent: it is removed (under its lock, as a whole) so that the
build rebuilds it, or pulls it again from a cache, or, where rebuilding is not allowed
(``wheel --no-rebuild``, ``release``), the run stops with exit 5. An entry made before install
manifests existed is *unverifiable*: said once, used, never called broken. A no-op ``build``
checks nothing of this: it stays at Ninja's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from builder.core.errors import BuildError
from builder.core.layout import Layout
from builder.engine.store import Store, Verdict, entry_name
from builder.plan import Plan

Say = Callable[[str, str], None]  # (component, text)
REPAIR_HINT = "`infini-stack store verify --repair` rebuilds (or pulls again) what changed"


@dataclass(frozen=True, slots=True)
class Checked:
    """What checking a plan's entries found: the entries that changed (removed when rebuilt)."""

    changed: tuple[Verdict, ...] = ()
    unverifiable: tuple[str, ...] = ()  # components


def check_plan(layout: Layout, plan: Plan, say: Say, *, rebuild: bool, before: str) -> Checked:
    """Verify every entry of ``plan`` the store has, ``before`` packaging or pushing.

    A changed entry is removed so that the run builds it again (``rebuild``); otherwise a
    BuildError names every changed entry and file."""
    store = Store(layout)
    changed: list[Verdict] = []
    unverifiable: list[str] = []
    for c in plan.components:
        if not store.has(c.key):
            continue
        verdict = store.verify(entry_name(c.key))
        if verdict.state == "unverifiable":
            unverifiable.append(c.name)
            say(c.name, f"note: {verdict.lines()[0]}")
        elif verdict.state == "changed":
            changed.append(verdict)
    if changed and not rebuild:
        raise BuildError(
            "\n".join(line for v in changed for line in v.lines())
            + f"\nrefusing to use {'it' if len(changed) == 1 else 'them'} {before}",
            hint=REPAIR_HINT,
        )
    for verdict in changed:
        say(verdict.component, "\n".join([*verdict.lines(), "  treated as absent: built again"]))
        discard(store, verdict.name)
    return Checked(tuple(changed), tuple(unverifiable))


def discard(store: Store, name: str) -> None:
    """Remove entry ``name`` as a whole, under its lock (a build of it may be waiting)."""
    with store.lock(name):  # the lock of a key is that of its name (key[:32])
        if (store.layout.store_root / name).exists():
            store.remove(name)


def verify_store(layout: Layout, names: Sequence[str] | None = None) -> list[Verdict]:
    """The verdict on each entry named (None: every entry of the store), in name order."""
    store = Store(layout)
    return [store.verify(n) for n in sorted(names if names is not None else store.entries())]
