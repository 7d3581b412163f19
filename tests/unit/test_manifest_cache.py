"""stack.yaml's ``cache:`` (URLs, or URLs and trusted keys), bad ones located; pulled rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builder.core.errors import ManifestError
from builder.engine.report import ComponentResult, RunReport, summary_table
from builder.manifest.loader import load_stack
from tests.conftest import MINI


def mini_with(tmp_path: Path, cache: str) -> Path:
    shutil.copytree(MINI, tmp_path / "mini")
    manifest = tmp_path / "mini" / "stack.yaml"
    manifest.write_text(manifest.read_text() + cache)
    return manifest


def test_the_cache_section_in_both_forms(tmp_path: Path) -> None:
    listed = load_stack(mini_with(tmp_path / "a", "cache: [oci://ghcr.io/org/c, file:///srv/c]\n"))
    assert (
        listed.cache.urls == ("oci://ghcr.io/org/c", "file:///srv/c") and listed.cache.trust == ()
    )
    mapped = load_stack(
        mini_with(
            tmp_path / "b", "cache:\n  urls: [oci://h/c]\n  trust: [ed25519:AAAA, keys/ci.pub]\n"
        )
    )
    assert mapped.cache.urls == ("oci://h/c",)
    assert mapped.cache.trust == ("ed25519:AAAA", str(tmp_path / "b" / "mini" / "keys" / "ci.pub"))
    assert load_stack(MINI / "stack.yaml").cache.urls == ()


def test_a_bad_cache_url_and_a_misspelled_key_are_located(tmp_path: Path) -> None:
    manifest = mini_with(tmp_path, "cache:\n  urls: [https://x/y]\n  trusts: []\n")
    with pytest.raises(ManifestError) as failed:
        load_stack(manifest)
    text = "\n".join(failed.value.problems)
    assert "'https://x/y' is not a cache URL" in text and "trusts" in text
    assert "stack.yaml:" in text


def test_the_summary_counts_pulled_components_with_where_they_came_from() -> None:
    report = RunReport(command="build", vendor="cpu", manifest="m", seconds=0.4)
    report.components = [
        ComponentResult(
            name="minirt",
            key="a" * 64,
            status="pulled",
            seconds=0.2,
            steps={"pull": 0.2},
            cache={"cache": "oci://h/c", "bytes": 2_500_000},
        ),
        ComponentResult(name="minilm", key="b" * 64, status="built", seconds=3.0),
    ]
    text = summary_table(report.to_json())
    assert "minirt     pulled  aaaaaaaaaaaa  0.2      pull 0.2s, 2.5 MB from oci://h/c" in text
    assert text.splitlines()[-1] == "cpu: 1 built, 0 from the store, 0 failed, 1 pulled in 0.4s"
