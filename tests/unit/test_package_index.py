"""wheels.index: the pages it writes and the tree it merges, with small wheels made here."""

from __future__ import annotations

import hashlib
import json
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from builder.core.errors import UsageError
from builder.pipeline.publish import read_sums, verified_wheels
from wheels.index import IndexFile, add_wheels, project_html, project_json, vendor_label


def make_wheel(directory: Path, version: str, requires_python: str = ">=3.8,<4") -> Path:
    name = f"demo_pkg-{version}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n"
    metadata += f"Requires-Python: {requires_python}\n\n"
    path = directory / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo_pkg/__init__.py", "")
        zf.writestr(f"demo_pkg-{version}.dist-info/METADATA", metadata)
    return path


class Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.found.append(dict(attrs))


def test_vendor_label_is_the_first_part_of_the_local_version() -> None:
    assert vendor_label("x-0.1.0+cu130.torch2.11-cp311-cp311-linux_x86_64.whl") == "cu130"
    assert vendor_label("x-0.1.0+cpu-cp311-cp311-linux_x86_64.whl") == "cpu"
    with pytest.raises(UsageError, match="no local version"):
        vendor_label("x-0.1.0-cp311-cp311-linux_x86_64.whl")
    with pytest.raises(UsageError, match="variant wheel"):
        vendor_label("x-0.1.0-cp311-cp311-linux_x86_64-cu130.whl")


def test_project_page_escapes_requires_python_and_carries_hash_and_metadata_hash() -> None:
    entry = IndexFile(
        filename="demo_pkg-1.0+cpu-py3-none-any.whl",
        version="1.0+cpu",
        sha256="a" * 64,
        size=10,
        requires_python='>=3.8,<4,!="x"',
        metadata_sha256="b" * 64,
    )
    text = project_html("demo-pkg", [entry])
    assert 'data-requires-python="&gt;=3.8,&lt;4,!=&quot;x&quot;"' in text
    parser = Anchors()
    parser.feed(text)
    (anchor,) = parser.found
    assert anchor["href"] == f"demo_pkg-1.0%2Bcpu-py3-none-any.whl#sha256={'a' * 64}"
    assert anchor["data-requires-python"] == '>=3.8,<4,!="x"'
    assert anchor["data-core-metadata"] == anchor["data-dist-info-metadata"] == "sha256=" + "b" * 64
    data = json.loads(project_json("demo-pkg", [entry]))
    assert data["meta"] == {"api-version": "1.1"}
    (file,) = data["files"]
    assert file["hashes"] == {"sha256": "a" * 64}
    assert file["core-metadata"] == {"sha256": "b" * 64}
    assert file["requires-python"] == '>=3.8,<4,!="x"'


def test_add_wheels_writes_the_wheel_its_metadata_and_both_page_kinds(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "1.0+cu130")
    root = tmp_path / "www"
    written = add_wheels(root, [wheel])
    project = root / "cu130" / "simple" / "demo-pkg"
    assert sorted(p.name for p in written) == [wheel.name, wheel.name + ".metadata"]
    metadata = (project / (wheel.name + ".metadata")).read_bytes()
    assert metadata.startswith(b"Metadata-Version: 2.1\nName: demo-pkg")
    page = json.loads((project / "index.json").read_text())
    (file,) = page["files"]
    assert file["hashes"]["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert file["core-metadata"]["sha256"] == hashlib.sha256(metadata).hexdigest()
    assert file["size"] == wheel.stat().st_size
    assert 'href="demo-pkg/"' in (root / "cu130" / "simple" / "index.html").read_text()


def test_a_clash_is_refused_before_any_file_is_written(tmp_path: Path) -> None:
    root = tmp_path / "www"
    first = tmp_path / "a"
    first.mkdir()
    add_wheels(root, [make_wheel(first, "1.0+cpu")])
    other = tmp_path / "b"
    other.mkdir()
    clash = make_wheel(other, "1.0+cpu", requires_python=">=3.9")  # same name, other bytes
    new = make_wheel(other, "2.0+cpu")
    with pytest.raises(UsageError, match="already publishes other files"):
        add_wheels(root, [new, clash])
    assert not (root / "cpu" / "simple" / "demo-pkg" / new.name).exists()


def test_verified_wheels_names_every_mismatch(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "1.0+cpu")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  {wheel.name}\n{'0' * 64}  gone.json\n")
    with pytest.raises(UsageError) as caught:
        verified_wheels(tmp_path)
    assert "gone.json: missing" in caught.value.message
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  {wheel.name}\n")
    assert verified_wheels(tmp_path) == [wheel]
    (tmp_path / "SHA256SUMS").write_text("not a line\n")
    with pytest.raises(UsageError, match=r"SHA256SUMS:1: not a `sha256sum` line"):
        read_sums(tmp_path)
