"""Do sampled token ids follow a distribution? A G-test, with small bins merged.

Pure Python (``math`` and ``random`` only), so that the runtime check can import it from its own
directory in a venv that holds nothing but the wheel and the target interpreter's packages.

The test: every token whose expected count is at least ``MIN_EXPECTED`` is a bin of its own; the
others are pooled into one bin (itself joined to the smallest kept bin while its expected count
is still below ``MIN_EXPECTED``). With observed counts O and expected counts E over k bins,
G = 2 * sum(O * ln(O / E)), which under the reference distribution is asymptotically chi-square
with k - 1 degrees of freedom. The sampler fails when G exceeds the chi-square quantile of
``NOMINAL``, 1e-6: a hundred times below the false-failure rate the check states
(``FALSE_FAILURE``, 1e-4), as room for the asymptotic approximation at expected counts as small
as 5. tests/unit/test_goodness.py measures the actual rate by simulation.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_EXPECTED = 5.0
NOMINAL = 1e-6  # the chi-square tail probability the threshold is set at
FALSE_FAILURE = 1e-4  # the false-failure rate the check states (a correct sampler failing)


@dataclass(frozen=True)
class Fit:
    statistic: float  # G
    dof: int
    p_value: float  # chi-square(dof) tail probability of the statistic
    threshold: float  # the statistic above which the sampler fails
    draws: int
    bins: int

    @property
    def ok(self) -> bool:
        return self.statistic <= self.threshold

    def as_dict(self) -> dict[str, float | int | bool]:
        return {
            "statistic": round(self.statistic, 3),
            "p_value": self.p_value,
            "threshold": round(self.threshold, 3),
            "dof": self.dof,
            "draws": self.draws,
            "bins": self.bins,
            "false_failure_rate": FALSE_FAILURE,
        }


def softmax(logits: Sequence[float], temperature: float = 1.0) -> list[float]:
    top = max(logits)
    weights = [math.exp((x - top) / temperature) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


def bins(probs: Sequence[float], draws: int) -> list[list[int]]:
    """Token ids grouped into bins whose expected counts are all at least ``MIN_EXPECTED``."""
    order = sorted(range(len(probs)), key=lambda t: -probs[t])
    kept = [[t] for t in order if probs[t] * draws >= MIN_EXPECTED]
    pool = [t for t in order if probs[t] * draws < MIN_EXPECTED]
    if not kept:
        return [order]
    if pool:
        if sum(probs[t] for t in pool) * draws >= MIN_EXPECTED:
            kept.append(pool)
        else:
            kept[-1] = kept[-1] + pool  # the smallest kept bin takes the remainder
    return kept


def g_statistic(observed: Sequence[int], expected: Sequence[float]) -> float:
    return 2.0 * sum(o * math.log(o / e) for o, e in zip(observed, expected, strict=True) if o)


def fit(draws: Iterable[int], probs: Sequence[float]) -> Fit:
    """The G-test of ``draws`` (token ids) against the distribution ``probs`` over ids."""
    counts = Counter(draws)
    n = sum(counts.values())
    groups = bins(probs, n)
    observed = [sum(counts[t] for t in group) for group in groups]
    expected = [n * sum(probs[t] for t in group) for group in groups]
    outside = n - sum(observed)  # ids outside the distribution's range: they fail at once
    dof = max(len(groups) - 1, 1)
    if outside:
        return Fit(math.inf, dof, 0.0, chi2_isf(NOMINAL, dof), n, len(groups))
    statistic = g_statistic(observed, expected)
    return Fit(statistic, dof, chi2_sf(statistic, dof), chi2_isf(NOMINAL, dof), n, len(groups))


def power(
    alternative: Sequence[float], probs: Sequence[float], draws: int, runs: int = 200
) -> float:
    """The share of ``runs`` simulated samplers drawing from ``alternative`` that the test of
    ``draws`` ids against ``probs`` fails (seeded: the same figure every time)."""
    rng = random.Random(20261204)
    ids = range(len(alternative))
    failed = sum(
        not fit(rng.choices(ids, weights=alternative, k=draws), probs).ok for _ in range(runs)
    )
    return failed / runs


def argmax_fit(probs: Sequence[float], draws: int) -> Fit:
    """The test of a sampler that always returns the most probable id."""
    top = max(range(len(probs)), key=lambda t: probs[t])
    return fit([top] * draws, probs)


# --- the chi-square tail, without scipy ---------------------------------------------------------


def chi2_sf(x: float, dof: int) -> float:
    """P(X > x) for X ~ chi-square(dof): the regularized upper incomplete gamma Q(dof/2, x/2)."""
    if x <= 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    return _gamma_q(dof / 2.0, x / 2.0)


def chi2_isf(p: float, dof: int) -> float:
    """The x with chi2_sf(x, dof) == p, by bisection (chi2_sf decreases in x)."""
    low, high = 0.0, float(dof)
    while chi2_sf(high, dof) > p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if chi2_sf(mid, dof) > p:
            low = mid
        else:
            high = mid
    return high


def _gamma_q(a: float, x: float) -> float:
    """Q(a, x) by its series below a + 1, by its continued fraction above (Numerical Recipes
    6.2), in logarithms so that the far tail does not underflow early."""
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        denominator = a
        for _ in range(10_000):
            denominator += 1.0
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - math.exp(log_prefix) * total)
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return math.exp(log_prefix) * h
