"""Each operator against a plain Python reference, over sizes and shapes."""

import ctypes
import random

import pytest

ELEMENTWISE = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y}


def floats(values):
    return (ctypes.c_float * max(len(values), 1))(*values)


def randoms(n):
    """``n`` values in [-1, 1], as float32 holds them."""
    return list(floats([random.uniform(-1, 1) for _ in range(n)]))[:n]


def test_backends_include_the_device(miniops, device):
    miniops.miniops_backends.restype = ctypes.c_char_p
    assert device in miniops.miniops_backends().decode().split(",")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("n", [0, 1, 7, 1024])
def test_elementwise(operator, device, name, n):
    a, b = randoms(n), randoms(n)
    out = floats([0.0] * n)
    assert operator(name)(floats(a), floats(b), out, n) == 0
    expected = [ELEMENTWISE[name](x, y) for x, y in zip(a, b, strict=True)]
    assert list(out)[:n] == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_add_rejects_a_negative_length(operator, device):
    assert operator("add")(floats([1.0]), floats([1.0]), floats([0.0]), -1) == -1


def gemm_reference(a, b, m, n, k):
    return [sum(a[i * k + p] * b[p * n + j] for p in range(k)) for i in range(m) for j in range(n)]


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (2, 3, 4), (5, 1, 7), (512, 512, 512)])
def test_gemm(operator, device, m, n, k):
    a, b = randoms(m * k), randoms(k * n)
    c = (ctypes.c_float * (m * n))()
    assert operator("gemm")(floats(a), floats(b), c, m, n, k) == 0
    assert list(c) == pytest.approx(gemm_reference(a, b, m, n, k), rel=1e-4, abs=1e-5)
