"""components/checks/goodness.py: the G-test the nvidia check holds InfiniLM's sampler to,
with simulated samplers (numpy draws): a correct one passes, an argmax one and one that ignores
the temperature fail, and a correct one fails at most at the stated rate."""

from __future__ import annotations

import importlib.util
import math
import sys
from types import ModuleType

import pytest

from tests.conftest import ROOT

np = pytest.importorskip("numpy")

DRAWS = 1024  # what the check draws


def load() -> ModuleType:
    path = ROOT / "components" / "checks" / "goodness.py"
    spec = importlib.util.spec_from_file_location("goodness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["goodness"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


goodness = load()


def logits_like_the_check(seed: int, scale: float) -> list[float]:
    """512 logits, the four specials at 0 (their rows of the head are zeroed)."""
    rng = np.random.default_rng(seed)
    row = rng.normal(0.0, scale, 512)
    row[:4] = 0.0
    return [float(x) for x in row]


PEAKED = goodness.softmax(logits_like_the_check(1, 3.0))
SPREAD = goodness.softmax(logits_like_the_check(2, 1.2))
# The approximation's hardest case: many bins whose expected counts are just above 5.
EDGE = [0.0055] * 120 + [(1 - 0.0055 * 120) / 392] * 392


def draw(probs: list[float], seed: int, n: int = DRAWS) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.choice(len(probs), size=n, p=np.asarray(probs))]


@pytest.mark.parametrize("x", [0.5, 3.0, 17.2, 80.0, 240.0])
@pytest.mark.parametrize("dof", [2, 4, 10, 40])
def test_chi2_tail_equals_the_closed_form_for_even_degrees(x: float, dof: int) -> None:
    half = x / 2
    exact = math.exp(-half) * sum(half**i / math.factorial(i) for i in range(dof // 2))
    assert goodness.chi2_sf(x, dof) == pytest.approx(exact, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("x", [0.2, 1.0, 9.0, 40.0, 120.0])
def test_chi2_tail_equals_the_closed_form_for_one_and_three_degrees(x: float) -> None:
    one = math.erfc(math.sqrt(x / 2))
    three = one + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
    assert goodness.chi2_sf(x, 1) == pytest.approx(one, rel=1e-9, abs=1e-300)
    assert goodness.chi2_sf(x, 3) == pytest.approx(three, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("dof", [1, 5, 30, 200])
def test_the_threshold_is_the_quantile_of_the_nominal_rate(dof: int) -> None:
    threshold = goodness.chi2_isf(goodness.NOMINAL, dof)
    assert goodness.chi2_sf(threshold, dof) == pytest.approx(goodness.NOMINAL, rel=1e-6)


def test_bins_all_expect_at_least_five_and_cover_every_id() -> None:
    for probs in (PEAKED, SPREAD, EDGE):
        groups = goodness.bins(probs, DRAWS)
        assert sorted(t for group in groups for t in group) == list(range(512))
        assert min(DRAWS * sum(probs[t] for t in group) for group in groups) >= 5.0
        assert len(groups) > 2  # the test has degrees of freedom to speak of


@pytest.mark.parametrize("probs", [PEAKED, SPREAD, EDGE], ids=["peaked", "spread", "edge"])
def test_a_correct_sampler_passes(probs: list[float]) -> None:
    fit = goodness.fit(draw(probs, 7), probs)
    assert fit.ok, fit
    assert fit.p_value > goodness.NOMINAL


@pytest.mark.parametrize("probs", [PEAKED, SPREAD, EDGE], ids=["peaked", "spread", "edge"])
def test_an_argmax_sampler_fails(probs: list[float]) -> None:
    fit = goodness.argmax_fit(probs, DRAWS)
    assert not fit.ok
    assert fit.p_value < goodness.NOMINAL
    assert not goodness.fit([max(range(512), key=probs.__getitem__)] * DRAWS, probs).ok


@pytest.mark.parametrize("seed", [1, 3, 5])
def test_a_sampler_that_ignores_the_temperature_fails_at_half(seed: int) -> None:
    logits = logits_like_the_check(seed, 3.0)
    wanted, ignored = goodness.softmax(logits, 0.5), goodness.softmax(logits, 1.0)
    assert not goodness.fit(draw(ignored, seed), wanted).ok
    assert goodness.power(ignored, wanted, DRAWS, runs=100) >= 0.99
    # ... while one that honours it passes.
    assert goodness.fit(draw(wanted, seed), wanted).ok


def test_an_id_outside_the_distribution_fails() -> None:
    fit = goodness.fit([*draw(PEAKED, 9)[:-1], 512], PEAKED)
    assert not fit.ok and fit.p_value == 0.0


def simulated_rate(probs: list[float], level: float, runs: int, seed: int) -> float:
    """The share of ``runs`` correct samplers whose G exceeds the quantile of ``level``:
    multinomial counts over the test's bins (what fit() counts), G as fit() computes it."""
    groups = goodness.bins(probs, DRAWS)
    p = np.array([sum(probs[t] for t in group) for group in groups])
    threshold = goodness.chi2_isf(level, len(groups) - 1)
    rng = np.random.default_rng(seed)
    failed = 0
    for _ in range(runs // 20_000):
        counts = rng.multinomial(DRAWS, p, size=20_000)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(counts > 0, counts * np.log(counts / (DRAWS * p)), 0.0)
        failed += int(np.count_nonzero(2 * terms.sum(axis=1) > threshold))
    return failed / runs


def test_the_simulated_statistic_is_the_one_fit_computes() -> None:
    sample = draw(EDGE, 11)
    groups = goodness.bins(EDGE, DRAWS)
    counts = [sum(sample.count(t) for t in group) for group in groups]
    expected = [DRAWS * sum(EDGE[t] for t in group) for group in groups]
    g = 2 * sum(o * math.log(o / e) for o, e in zip(counts, expected, strict=True) if o)
    assert goodness.fit(sample, EDGE).statistic == pytest.approx(g, rel=1e-12)


@pytest.mark.parametrize("probs", [PEAKED, EDGE], ids=["peaked", "edge"])
def test_the_chi_square_approximation_holds_at_one_percent(probs: list[float]) -> None:
    rate = simulated_rate(probs, 0.01, 100_000, seed=3)
    assert 0.005 < rate < 0.03, rate  # G runs a little high at expected counts near 5


@pytest.mark.parametrize("probs", [PEAKED, EDGE], ids=["peaked", "edge"])
def test_a_correct_sampler_fails_less_often_than_the_stated_rate(probs: list[float]) -> None:
    """400,000 correct samplers: at the stated rate (1e-4) about 40 would fail; at most 10 may."""
    runs = 400_000
    rate = simulated_rate(probs, goodness.NOMINAL, runs, seed=5)
    assert rate * runs <= 10, rate
    assert rate <= goodness.FALSE_FAILURE / 4
