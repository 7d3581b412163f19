"""The CUDA runtime a wheel declares: its local version, else its Requires-Dist."""

from __future__ import annotations

import pytest

from wheels.audit.requires import read_requires
from wheels.cuda.audit import local_runtime, required_runtime


@pytest.mark.parametrize(
    ("local", "runtime"),
    [("cu130", (13, 0)), ("cu128", (12, 8)), ("cu92", (9, 2)), ("cu118.post1", (11, 8)),
     ("cuda", None), ("cpu", None), ("cu1", None)],
)  # fmt: skip
def test_local_version(local: str, runtime: tuple[int, int] | None) -> None:
    assert local_runtime(local) == runtime


@pytest.mark.parametrize(
    ("requirement", "runtime"),
    [
        ("nvidia-cuda-runtime>=13", (13, 0)),
        ("nvidia-cuda-runtime>=13.1,<14", (13, 1)),
        ("nvidia_cuda_runtime~=12.8", (12, 8)),
        ("nvidia-cuda-runtime-cu12==12.4.127", (12, 4)),
        ("nvidia-cuda-runtime-cu12", (12, 0)),
        ("nvidia-cuda-runtime-cu12==12.*", (12, 0)),
        ("nvidia-cuda-runtime<14", None),
        ("nvidia-cuda-runtime", None),
        ("nvidia-cublas>=13", None),
    ],
)
def test_requires_dist(requirement: str, runtime: tuple[int, int] | None) -> None:
    assert required_runtime(read_requires(requirement)) == runtime
