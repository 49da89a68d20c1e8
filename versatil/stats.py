"""Estimates with their uncertainty, and comparisons that call a difference inside it a tie.

Pure functions on numbers, the way benchmarking tools compare two programs (pyperf,
hyperfine, criterion): a speed is a median with a distribution-free confidence interval
(order statistics), a speedup is the median of paired ratios with its interval, an
objective over seeds is a mean with a Student-t interval, and the change between two
settings trained with the same seeds is the mean of their per-seed differences, with its
Student-t interval. A comparison says ``faster`` or ``slower`` only when the whole interval
lies on one side; anything else is a tie.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Literal

__all__ = [
    "CONFIDENCE",
    "POWER",
    "ROUNDING",
    "EliminationRule",
    "Estimate",
    "difference_ci",
    "mean_ci",
    "median_ci",
    "paired_difference_ci",
    "ratio_ci",
    "ratio_of",
    "same_value",
    "seeds_to_decide",
    "speed_verdict",
]

CONFIDENCE = 0.95
"""The confidence level of every interval versatil reports."""

POWER = 0.8
"""The chance of deciding that the seeds :func:`seeds_to_decide` names are sized for."""

ROUNDING = 1e-6
"""Two objectives closer than this, relative to their size, are the same value.

Float rounding is not a difference: float64 and float32 accuracies of the same 350 correct
predictions out of 360 differ by about 1e-8.
"""

Comparison = Literal["faster", "slower", "tie"]


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A value with its confidence interval.

    Attributes:
        value: The point estimate (a median, or a mean).
        low: The interval's lower bound (``-inf`` when the data cannot bound it).
        high: The interval's upper bound (``inf`` when the data cannot bound it).
        n: How many samples it rests on.
        cv: The samples' coefficient of variation (standard deviation over mean), or
            ``None`` with fewer than two samples.
        coverage: The interval's actual confidence: order statistics reach the nominal
            level only with enough samples (six for 95%); below that it is less.
    """

    value: float
    low: float
    high: float
    n: int
    cv: float | None = None
    coverage: float = CONFIDENCE

    @property
    def bounded(self) -> bool:
        """Whether both bounds are finite."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def relative_halfwidth(self) -> float:
        """Half the interval's width over the value (``inf`` when unbounded or at zero)."""
        if not self.bounded or self.value == 0:
            return math.inf
        return (self.high - self.low) / 2 / abs(self.value)


def _cv(samples: Sequence[float]) -> float | None:
    if len(samples) < 2:
        return None
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / abs(mean) if mean else None


def _binomial_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The median with a distribution-free interval from order statistics.

    The interval is ``[x_(k), x_(n-k+1)]`` for the largest ``k`` whose coverage
    ``1 - 2 P(X < k)`` (``X ~ Binomial(n, 1/2)``) is still at least ``confidence``. With too
    few samples for that level the interval is the range, and ``coverage`` says how sure
    it is; with one sample it is unbounded.
    """
    values = sorted(float(s) for s in samples)
    n = len(values)
    if n == 0:
        raise ValueError("median_ci needs at least one sample")
    median = statistics.median(values)
    if n == 1:
        return Estimate(median, -math.inf, math.inf, 1, None, 0.0)
    k, coverage = 1, 1 - 2 * _binomial_cdf(0, n)
    while k + 1 <= n // 2:
        wider = 1 - 2 * _binomial_cdf(k, n)
        if wider < confidence:
            break
        k, coverage = k + 1, wider
    return Estimate(median, values[k - 1], values[n - k], n, _cv(values), coverage)


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The mean with a Student-t interval (seeds as replicates); unbounded for one value."""
    data = [float(v) for v in values]
    n = len(data)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = statistics.fmean(data)
    if n == 1:
        return Estimate(mean, -math.inf, math.inf, 1, None, 0.0)
    from scipy import stats

    spread = statistics.stdev(data) / math.sqrt(n)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * spread
    return Estimate(mean, mean - half, mean + half, n, _cv(data), confidence)


def ratio_ci(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = CONFIDENCE
) -> Estimate:
    """A speedup from paired rounds: the median of per-round ratios, with its interval.

    Round ``i`` timed both candidates back to back, so ``numerators[i] / denominators[i]``
    is one measurement of the ratio with the round's shared noise cancelled.
    """
    if len(numerators) != len(denominators):
        raise ValueError("ratio_ci needs one denominator per numerator")
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True) if b > 0]
    return median_ci(ratios, confidence)


def ratio_of(a: Estimate, b: Estimate) -> Estimate:
    """``a / b`` for two independent estimates: the point ratio, the interval by division.

    The bounds are ``a.low / b.high`` and ``a.high / b.low``: conservative (wider than a
    paired estimate, which :func:`ratio_ci` gives when both were timed in the same rounds).
    Unbounded when either interval is, or when ``b`` may be zero.
    """
    value = a.value / b.value if b.value else math.inf
    if not (a.bounded and b.bounded) or b.low <= 0 or a.low < 0:
        return Estimate(value, -math.inf, math.inf, min(a.n, b.n), None, 0.0)
    coverage = a.coverage * b.coverage
    return Estimate(value, a.low / b.high, a.high / b.low, min(a.n, b.n), None, coverage)


def difference_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> Estimate:
    """``mean(a) - mean(b)`` with Welch's interval (unequal variances); unbounded below 2 each.

    Two settings' objectives over their seeds: the interval says whether the difference
    between them exceeds seed-to-seed variation.
    """
    xs, ys = [float(v) for v in a], [float(v) for v in b]
    if not xs or not ys:
        raise ValueError("difference_ci needs at least one value on each side")
    diff = statistics.fmean(xs) - statistics.fmean(ys)
    if len(xs) < 2 or len(ys) < 2:
        return Estimate(diff, -math.inf, math.inf, min(len(xs), len(ys)), None, 0.0)
    from scipy import stats

    va, vb = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    spread = math.sqrt(va + vb)
    if spread == 0:
        return Estimate(diff, diff, diff, min(len(xs), len(ys)), None, confidence)
    df = (va + vb) ** 2 / (va**2 / (len(xs) - 1) + vb**2 / (len(ys) - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * spread
    return Estimate(diff, diff - half, diff + half, min(len(xs), len(ys)), None, confidence)


def paired_difference_ci(
    values: Sequence[float], reference: Sequence[float], confidence: float = CONFIDENCE
) -> Estimate:
    """``mean(values[i] - reference[i])`` with a Student-t interval over the differences.

    Two settings trained with the same seeds (common random numbers): pair ``i`` shares its
    initialisation and data order, so what the seed does cancels in the difference.
    Identical pairs give exactly 0 with the interval ``[0, 0]``; one pair is unbounded.
    """
    if len(values) != len(reference):
        raise ValueError("paired_difference_ci needs one reference value per value")
    if not values:
        raise ValueError("paired_difference_ci needs at least one pair")
    diffs = [float(a) - float(b) for a, b in zip(values, reference, strict=True)]
    return dataclasses.replace(mean_ci(diffs, confidence), cv=None)


def _power(sd: float, margin: float, n: int, confidence: float) -> float:
    """The chance that ``n`` seeds' Student-t interval clears a bound ``margin`` away.

    The interval's end nearer the bound clears it when ``margin / (s / sqrt(n))`` exceeds
    ``t(n - 1)``; with the true distance ``margin`` and per-seed deviation ``sd``, that
    statistic follows a noncentral t with ``n - 1`` degrees of freedom and noncentrality
    ``margin * sqrt(n) / sd``.
    """
    from scipy import stats

    critical = float(stats.t.ppf((1 + confidence) / 2, n - 1))
    return float(stats.nct.sf(critical, n - 1, margin * math.sqrt(n) / sd))


def seeds_to_decide(
    sd: float,
    margin: float,
    confidence: float = CONFIDENCE,
    power: float = POWER,
    limit: int = 10_000,
) -> int | None:
    """How many seeds decide a call with probability ``power`` (80%): a power calculation.

    The least ``n >= 2`` at which a Student-t interval at ``confidence`` clears a bound
    ``margin`` away with probability at least ``power``, when the change truly lies
    ``margin`` from the bound and the per-seed standard deviation truly is ``sd`` (both
    as observed: the estimate is a plan, not a promise). An interval merely narrower than
    ``margin`` at ``n`` seeds, the usual precision rule, decides only about half the time.
    ``None`` when no ``n`` up to ``limit`` does (a ``margin`` of 0 or less, or a spread
    too large for it).
    """
    if margin <= 0 or not math.isfinite(sd) or not math.isfinite(margin):
        return None
    if sd <= 0:
        return 2

    def decides(n: int) -> bool:
        return _power(sd, margin, n, confidence) >= power

    if not decides(limit):
        return None
    low, high = 1, 2  # the power grows with n: find it by doubling, then halving
    while not decides(high):
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        mid = (low + high) // 2
        if decides(mid):
            high = mid
        else:
            low = mid
    return high


def speed_verdict(speedup: Estimate) -> Comparison:
    """``faster`` when the speedup's whole interval is above 1, ``slower`` below; else a tie."""
    if speedup.low > 1:
        return "faster"
    if speedup.high < 1:
        return "slower"
    return "tie"


def same_value(a: float, b: float, rel: float = ROUNDING) -> bool:
    """Whether two objectives are equal but for float rounding."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=rel * 1e-3)


@dataclasses.dataclass(frozen=True)
class EliminationRule:
    """The sequential sign test that eliminates a setting slower than the reference.

    A sequential probability ratio test on the sign of each round's paired speed ratio:
    a lost round (ratio below 1) multiplies the evidence by ``2 p1``, a won one by
    ``2 (1 - p1)``. Under the null that the setting loses a round with probability at most
    1/2 (given the rounds before), the evidence is a nonnegative supermartingale, so it
    ever reaches ``m / alpha`` with probability at most ``alpha / m`` (Ville's
    inequality); over the ``m`` settings, at most ``alpha`` (the union bound).

    Attributes:
        alpha: The family-wise error: the chance of eliminating any setting that is not
            slower than the reference, over the whole screen.
        contenders: ``m``, the settings raced against the reference (the reference not
            counted).
        p1: The chance of losing a round under the alternative the test is tuned for.
    """

    alpha: float
    contenders: int
    p1: float = 0.9

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, not {self.alpha}")
        if self.contenders < 1:
            raise ValueError(f"contenders must be at least 1, not {self.contenders}")
        if not 0.5 < self.p1 < 1:
            raise ValueError(f"p1 must be between 0.5 and 1, not {self.p1}")

    @property
    def threshold(self) -> float:
        """The evidence that eliminates: ``m / alpha``."""
        return self.contenders / self.alpha

    @property
    def straight_losses(self) -> int:
        """The fewest rounds that can eliminate: straight losses from the first round."""
        return math.ceil(math.log(self.threshold) / math.log(2 * self.p1) - 1e-12)

    def evidence(self, ratios: Sequence[float]) -> list[float]:
        """The likelihood ratio against the null after each round (a loss: a ratio < 1)."""
        out, value = [], 1.0
        for ratio in ratios:
            value *= 2 * self.p1 if ratio < 1 else 2 * (1 - self.p1)
            out.append(value)
        return out

    def eliminated_at(self, ratios: Sequence[float]) -> int | None:
        """The round (counted from 1) whose evidence first reached the threshold, or ``None``."""
        for index, value in enumerate(self.evidence(ratios), start=1):
            if value >= self.threshold * (1 - 1e-12):
                return index
        return None
