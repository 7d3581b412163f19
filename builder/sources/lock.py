"""Pins: resolve a branch or tag to a full SHA and rewrite only that pin in stack.yaml; check pins.

The manifest is edited as text at the YAML node's marks, not loaded and dumped again, so its
comments, order, quoting and layout stay as they were; only the one value changes (or one line is
added where the pin did not exist yet).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from builder import vendors as vendor_registry
from builder.core import proc
from builder.core.errors import EXIT_SOURCES, CommandFailed, SourceError, UsageError
from builder.core.fs import atomic_write
from builder.core.layout import Layout
from builder.manifest.model import GitSource, Stack
from builder.manifest.schema import unknown_message
from builder.sources.fetch import Fetcher, git_env, rewrite

SHA_RE = re.compile(r"^[0-9a-f]{40}$")


# --- resolving ------------------------------------------------------------------------------------


def ls_remote(url: str, mirrors: Mapping[str, str]) -> dict[str, str]:
    """ref name -> SHA as the remote advertises them (peeled tags as ``refs/tags/T^{}``)."""
    where = rewrite(url, mirrors)
    try:
        out = proc.run(
            ["git", "ls-remote", where],
            what=f"git ls-remote {where}",
            env=git_env(mirrors),
            exit_code=EXIT_SOURCES,
            timeout=300,
        ).output
    except CommandFailed as exc:
        raise SourceError(
            f"cannot list the refs of {where}:\n{exc.tail}",
            hint="check the URL and the network, or give a local copy with --mirror URL=DIR",
        ) from exc
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if SHA_RE.match(sha) and ref:
            refs[ref] = sha
    return refs


def resolve_ref(url: str, ref: str, mirrors: Mapping[str, str]) -> str:
    """A full commit SHA for ``ref``: a branch, a tag (peeled), a full ref name, or a SHA."""
    if SHA_RE.match(ref):
        return ref
    refs = ls_remote(url, mirrors)
    for candidate in (
        f"refs/tags/{ref}^{{}}",
        f"refs/tags/{ref}",
        f"refs/heads/{ref}",
        f"{ref}^{{}}",
        ref,
    ):
        if candidate in refs and candidate.startswith("refs/"):
            return refs[candidate]
    branches = sorted(r.removeprefix("refs/heads/") for r in refs if r.startswith("refs/heads/"))
    raise SourceError(
        f"'{ref}' is neither a branch nor a tag of {rewrite(url, mirrors)}",
        hint=unknown_message("branch", ref, branches) if branches else None,
    )


# --- editing the manifest -------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def set_pin(text: str, component: str, sha: str, vendor: str | None = None) -> str:
    """``text`` with the pin of ``component`` (for ``vendor`` when given) set to ``sha``.

    Replaces the ``rev`` value in place when it exists; otherwise adds one ``rev:`` line (and the
    ``vendors:``/vendor keys when missing), indented like its neighbours.
    """
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    comp = _child(_child(root, "components"), component)
    if comp is None:
        raise UsageError(f"component '{component}' is not in the manifest")
    if not isinstance(comp, yaml.MappingNode):
        raise UsageError(f"components.{component} is not a mapping")
    if vendor is None:
        if _child(comp, "path") is not None and _child(comp, "git") is None:
            raise UsageError(f"component '{component}' is a path source: it has no pin to lock")
        return _apply(text, _set_key(text, comp, "rev", sha, f"components.{component}"))
    vendors = _child(comp, "vendors")
    where = f"components.{component}"
    if vendors is None:
        indent = _indent_of(comp)
        block = (
            f"{' ' * indent}vendors:\n{' ' * (indent + 2)}{vendor}:\n"
            f"{' ' * (indent + 4)}rev: {sha}\n"
        )
        return _apply(text, _append(text, comp, block, where))
    if not isinstance(vendors, yaml.MappingNode):
        raise UsageError(f"{where}.vendors is not a mapping")
    override = _vendor_child(vendors, vendor)
    if override is None:
        if vendors.flow_style:
            raise UsageError(f"{where}.vendors is written inline ({{...}}); add the pin by hand")
        indent = _indent_of(vendors)
        block = f"{' ' * indent}{vendor}:\n{' ' * (indent + 2)}rev: {sha}\n"
        return _apply(text, _append(text, vendors, block, f"{where}.vendors"))
    if not isinstance(override, yaml.MappingNode):
        raise UsageError(f"{where}.vendors.{vendor} is not a mapping")
    if _child(override, "path") is not None:
        raise UsageError(f"{where}.vendors.{vendor} is a path source: it has no pin to lock")
    return _apply(text, _set_key(text, override, "rev", sha, f"{where}.vendors.{vendor}"))


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            found: yaml.Node = v
            return found
    return None


def _vendor_child(vendors: yaml.MappingNode, vendor: str) -> yaml.Node | None:
    for k, v in vendors.value:
        if (
            isinstance(k, yaml.ScalarNode)
            and vendor_registry.is_known(k.value)
            and vendor_registry.canonical_name(k.value) == vendor
        ):
            found: yaml.Node = v
            return found
    return None


def _set_key(text: str, mapping: yaml.MappingNode, key: str, value: str, where: str) -> Edit:
    node = _child(mapping, key)
    if node is not None:
        if not isinstance(node, yaml.ScalarNode):
            raise UsageError(f"{where}.{key} is not a plain value")
        return Edit(node.start_mark.index, node.end_mark.index, value)
    if mapping.flow_style:
        # {path: x} or {} -> {rev: SHA, ...}: right after the opening brace.
        brace = mapping.start_mark.index
        empty = not mapping.value
        return Edit(brace + 1, brace + 1, f"{key}: {value}" + ("" if empty else ", "))
    first_key = mapping.value[0][0]
    at = text.rfind("\n", 0, first_key.start_mark.index) + 1
    indent = " " * first_key.start_mark.column
    # After `git:` when there is one, else as the first key.
    git = _child(mapping, "git")
    if git is not None:
        at = _after(text, git)
    return Edit(at, at, _lines(text, at, f"{indent}{key}: {value}\n"))


def _append(text: str, mapping: yaml.Node, block: str, where: str) -> Edit:
    if not isinstance(mapping, yaml.MappingNode) or not mapping.value or mapping.flow_style:
        raise UsageError(f"{where} is written inline or empty; add the pin by hand")
    at = _after(text, mapping)
    return Edit(at, at, _lines(text, at, block))


def _after(text: str, node: yaml.Node) -> int:
    """Where the line after ``node``'s last line starts.

    A block collection ends where the next token starts (after any comments that follow it), so
    its last scalar is what marks its last line.
    """
    while (
        isinstance(node, yaml.MappingNode | yaml.SequenceNode)
        and not node.flow_style
        and node.value
    ):
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    index = node.end_mark.index
    if index and text[index - 1] == "\n":  # block scalars end at the next line already
        return index
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _lines(text: str, at: int, block: str) -> str:
    """``block`` starts a line of its own even at the end of a file without a final newline."""
    return "\n" + block if at == len(text) and text and not text.endswith("\n") else block


def _indent_of(mapping: yaml.Node) -> int:
    assert isinstance(mapping, yaml.MappingNode) and mapping.value
    return int(mapping.value[0][0].start_mark.column)


def _apply(text: str, edit: Edit) -> str:
    out = text[: edit.start] + edit.text + text[edit.end :]
    yaml.safe_load(out)  # the edit must leave valid YAML
    return out


def write_pin(manifest: Path, component: str, sha: str, vendor: str | None = None) -> bool:
    """Rewrite the pin in ``manifest``; False when it already held ``sha``."""
    text = manifest.read_text(encoding="utf-8")
    new = set_pin(text, component, sha, vendor)
    if new == text:
        return False
    atomic_write(manifest, new)
    return True


def parse_request(spec: str) -> tuple[str, str]:
    name, sep, ref = spec.partition("=")
    if not sep or not name or not ref:
        raise UsageError(f"expected COMPONENT=REF, got '{spec}'")
    return name, ref


def source_for(stack: Stack, component: str, vendor: str | None) -> GitSource:
    """The git source a lock of ``component`` (for ``vendor``) resolves against."""
    if component not in stack.components:
        raise UsageError(unknown_message("component", component, stack.components))
    entry = stack.components[component]
    if (lender := entry.borrows) is not None:
        raise UsageError(f"{component} builds {lender}'s checkout: lock {lender}, which both build")
    if vendor and not entry.in_stack(vendor):
        raise UsageError(f"component '{component}' is not in {vendor}'s stack: nothing to lock")
    source = entry.source_for(vendor) if vendor else entry.source
    if not isinstance(source, GitSource):
        where = f" for vendor '{vendor}'" if vendor else ""
        raise UsageError(f"component '{component}'{where} is a path source: nothing to lock")
    return source


# --- the contract: a superproject's gitlinks -----------------------------------------------------


def set_contract(text: str, block: str) -> str:
    """``text`` with its top-level ``contract:`` replaced by ``block`` (added before
    ``components:`` when there is none)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise UsageError("the manifest is not a mapping")
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "contract":
            start = text.rfind("\n", 0, key.start_mark.index) + 1
            return _apply(text, Edit(start, _after(text, value), block))
    for key, _value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "components":
            start = text.rfind("\n", 0, key.start_mark.index) + 1
            return _apply(text, Edit(start, start, block + "\n"))
    raise UsageError("the manifest has no 'components:'")


# --- checking -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Drift:
    """How far a pin is from its branch, and what became of a pull request it was taken from."""

    branch: str | None = None  # the branch measured against (the default branch when it has it)
    behind: int | None = None  # commits on ``branch`` after the pin
    newest: str | None = None  # ``branch``'s head: short SHA, date and subject
    pull: str | None = None  # refs/pull/N/head when the pin is (or was) a pull request's head
    merged_as: str | None = None  # the commit on the default branch that merged it


@dataclass(frozen=True, kw_only=True)
class PinCheck:
    component: str
    vendors: tuple[str, ...]  # empty: the component's default pin
    url: str
    rev: str
    ok: bool
    detail: str
    contract_rev: str | None = None  # the contract's gitlink for this component, if it has one
    reason: str | None = None  # the manifest's reason for departing from it
    drift: Drift = Drift()

    @property
    def contract_state(self) -> str:
        """``-`` (not in the contract), ``=`` (its gitlink), ``declared`` or ``UNDECLARED``."""
        if self.contract_rev is None:
            return "-"
        if self.contract_rev == self.rev:
            return "="
        return "declared" if self.reason else "UNDECLARED"


def pins(stack: Stack) -> list[tuple[str, tuple[str, ...], GitSource]]:
    """Every distinct git pin: (component, vendors using an override (empty: default), source)."""
    out: list[tuple[str, tuple[str, ...], GitSource]] = []
    for name, component in stack.components.items():
        if component.borrows is not None:
            continue  # its lender's pins, listed under the lender
        if isinstance(component.source, GitSource):
            out.append((name, (), component.source))
        for vendor, override in component.overrides.items():
            if isinstance(override.source, GitSource):
                out.append((name, (vendor,), override.source))
    return out


def check_pins(
    stack: Stack,
    layout: Layout,
    mirrors: Mapping[str, str],
    contract: Mapping[str, str] | None = None,
) -> list[PinCheck]:
    """Is every pin still reachable from a branch or tag of its repository, does it keep to the
    contract's gitlinks (``contract``: component -> SHA), and how far behind its branch is it?"""
    contract = contract or {}
    fetcher = Fetcher(layout, mirrors)
    refs_by_url: dict[str, dict[str, str] | SourceError] = {}
    results: list[PinCheck] = []
    for name, vendors, source in pins(stack):
        if source.url not in refs_by_url:
            try:
                refs_by_url[source.url] = ls_remote(source.url, mirrors)
            except SourceError as exc:
                refs_by_url[source.url] = exc
        refs = refs_by_url[source.url]
        drift = Drift()
        if isinstance(refs, SourceError):
            ok, detail = False, f"repository unreachable: {refs.message.splitlines()[0]}"
        else:
            ok, detail = _reachable(fetcher, name, source, refs)
            drift = _drift(fetcher, name, source, refs)
        component = stack.components[name]
        results.append(
            PinCheck(
                component=name,
                vendors=vendors,
                url=source.url,
                rev=source.rev,
                ok=ok,
                detail=detail,
                contract_rev=contract.get(name),
                reason=component.reason_for(vendors[0]) if vendors else component.reason,
                drift=drift,
            )
        )
    return results


def _reachable(
    fetcher: Fetcher, name: str, source: GitSource, refs: Mapping[str, str]
) -> tuple[bool, str]:
    durable = {
        r: s
        for r, s in refs.items()
        if r.startswith(("refs/heads/", "refs/tags/")) and not r.endswith("^{}")
    }
    for ref, sha in sorted(durable.items()):
        if sha == source.rev:
            return True, f"tip of {ref}"
    try:
        cache = fetcher.ensure_commit(name, source)
    except SourceError:
        others = sorted(r for r, s in refs.items() if s == source.rev)
        if others:
            return False, f"only the tip of {others[0]} (not on any branch or tag)"
        return False, "no longer in the repository (not on any branch or tag)"
    _refresh(fetcher, cache, source)
    containing = proc.run(
        [
            "git",
            "--git-dir",
            str(cache),
            "for-each-ref",
            "--contains",
            source.rev,
            "--format=%(refname)",
            "refs/heads",
            "refs/tags",
        ],
        check=False,
        env=git_env(fetcher.mirrors),
    ).output.split()
    if containing:
        shown = ", ".join(containing[:3]) + (", ..." if len(containing) > 3 else "")
        return True, f"on {shown}"
    others = sorted(r for r, s in refs.items() if s == source.rev)
    if others:
        return False, f"only the tip of {others[0]} (not on any branch or tag)"
    return False, "not on any branch or tag (the branch that held it was rewritten or deleted)"


def _refresh(fetcher: Fetcher, cache: Path, source: GitSource) -> None:
    """The cache holds the branches and tags as fetched; refresh them (deleted ones drop out)."""
    url = rewrite(source.url, fetcher.mirrors)
    proc.run(
        [
            "git",
            "--git-dir",
            str(cache),
            "fetch",
            "--quiet",
            "--prune",
            "--tags",
            url,
            "+refs/heads/*:refs/heads/*",
        ],
        check=False,
        env=git_env(fetcher.mirrors),
    )


def _git_out(fetcher: Fetcher, cache: Path, *args: str) -> str | None:
    result = proc.run(
        ["git", "--git-dir", str(cache), *args], check=False, env=git_env(fetcher.mirrors)
    )
    return result.output.strip() if result.returncode == 0 else None


def default_branch(refs: Mapping[str, str]) -> str | None:
    """The branch the remote's HEAD points at (main or master first when several match)."""
    head = refs.get("HEAD")
    branches = [r for r, s in refs.items() if r.startswith("refs/heads/") and s == head]
    for preferred in ("refs/heads/main", "refs/heads/master"):
        if preferred in branches:
            return preferred
    return branches[0] if branches else None


def _drift(fetcher: Fetcher, name: str, source: GitSource, refs: Mapping[str, str]) -> Drift:
    try:
        cache = fetcher.ensure_commit(name, source)
    except SourceError:
        return Drift()
    _refresh(fetcher, cache, source)
    default = default_branch(refs)
    pull = next(
        (r for r, s in sorted(refs.items()) if s == source.rev and r.startswith("refs/pull/")),
        None,
    )
    branch = _branch_holding(fetcher, cache, source.rev, default)
    behind = newest = None
    if branch is not None:
        count = _git_out(fetcher, cache, "rev-list", "--count", f"{source.rev}..{branch}")
        behind = int(count) if count else None
        newest = _git_out(fetcher, cache, "log", "-1", "--format=%h %cs %s", branch)
    merged_as = None
    if pull is not None and default is not None:
        merged_as = _merged_as(fetcher, cache, source.rev, pull, default)
    return Drift(
        branch=branch.removeprefix("refs/heads/") if branch else None,
        behind=behind,
        newest=newest,
        pull=pull,
        merged_as=merged_as,
    )


def _branch_holding(fetcher: Fetcher, cache: Path, rev: str, default: str | None) -> str | None:
    """The default branch when it contains ``rev``, else the first branch that does."""
    out = _git_out(
        fetcher, cache, "for-each-ref", "--contains", rev, "--format=%(refname)", "refs/heads"
    )
    holding = out.split() if out else []
    if default in holding:
        return default
    return holding[0] if holding else None


def _merged_as(fetcher: Fetcher, cache: Path, rev: str, pull: str, default: str) -> str | None:
    """The commit of ``default`` that merged pull request ``pull``: its merge commit when the
    head itself was merged, else a commit whose subject names the request, ``(#N)``, as
    GitHub's squash and rebase merges write it."""
    number = pull.split("/")[2]
    fetched = _git_out(fetcher, cache, "merge-base", "--is-ancestor", rev, default)
    if fetched is not None:
        merges = _git_out(
            fetcher,
            cache,
            "rev-list",
            "--ancestry-path",
            "--merges",
            "--reverse",
            f"{rev}..{default}",
        )
        return merges.split()[0] if merges else rev
    found = _git_out(
        fetcher, cache, "log", "--format=%H", "--fixed-strings", f"--grep=(#{number})", default
    )
    return found.split()[0] if found else None
