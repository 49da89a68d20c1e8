"""Estimates with known answers: intervals that cover, speedups called only beyond noise."""

import math
import random
import statistics

import numpy as np
import pytest

from versatil.stats import (
    mean_ci,
    median_ci,
    ratio_ci,
    same_value,
    speed_verdict,
)


def paired_rounds(speedup, noise, rounds, seed):
    """Times of a baseline and a candidate ``speedup`` times faster, each round's noise shared."""
    rng = random.Random(seed)
    base, candidate = [], []
    for _ in range(rounds):
        load = rng.uniform(0.7, 1.3)  # what both runs of a round share (the machine's load)
        base.append(1000 * load * rng.gauss(1, noise))
        candidate.append(1000 * speedup * load * rng.gauss(1, noise))
    return candidate, base


def test_a_real_speedup_is_found_and_a_small_one_in_the_noise_is_a_tie():
    ties = 0
    for seed in range(40):
        fast = ratio_ci(*paired_rounds(1.9, 0.05, 8, seed))
        assert speed_verdict(fast) == "faster"
        assert fast.low < 1.9 < fast.high
        assert speed_verdict(ratio_ci(*paired_rounds(0.6, 0.05, 8, seed))) == "slower"
        ties += speed_verdict(ratio_ci(*paired_rounds(1.02, 0.10, 8, seed))) == "tie"
    # A 95% interval is wrong about one time in twenty at most; this one is wider (99%).
    assert ties >= 38


def test_the_median_interval_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    hits = 0
    for _ in range(2000):
        samples = [rng.lognormvariate(0, 0.5) for _ in range(15)]
        estimate = median_ci(samples)
        hits += estimate.low <= 1.0 <= estimate.high  # the lognormal's median is 1
        assert estimate.coverage >= 0.95
    assert 0.94 <= hits / 2000 <= 0.99


def test_few_samples_give_an_honest_interval():
    one = median_ci([5.0])
    assert one.value == 5.0 and not one.bounded and one.coverage == 0
    three = median_ci([3.0, 1.0, 2.0])
    assert (three.low, three.value, three.high) == (1.0, 2.0, 3.0)
    assert three.coverage == pytest.approx(0.75)  # below 95%: said, not hidden
    six = median_ci([1.0, 2, 3, 4, 5, 6])
    assert six.coverage >= 0.95 and (six.low, six.high) == (1.0, 6.0)
    with pytest.raises(ValueError, match="at least one"):
        median_ci([])


def test_the_mean_over_seeds_has_a_t_interval():
    values = [0.50, 0.52, 0.48, 0.51]
    estimate = mean_ci(values)
    assert estimate.value == pytest.approx(statistics.fmean(values))
    half = 3.182 * statistics.stdev(values) / 2  # t(0.975, 3) = 3.182
    assert estimate.high - estimate.value == pytest.approx(half, rel=1e-3)
    assert not mean_ci([0.5]).bounded


def test_exact_and_float_rounding_ties_are_ties():
    assert same_value(0.97222222222, 0.97222220898)  # fp64 vs fp32: 350/360 both
    assert same_value(0.05302, 0.05302)
    assert not same_value(0.05302, 0.05272)
    assert not same_value(0.0, 1e-3)
    assert median_ci([10.0, 12.0]).cv == pytest.approx(math.sqrt(2) / 11)


def test_a_ratio_of_independent_estimates_divides_their_intervals():
    from versatil.stats import Estimate, ratio_of

    fast, base = Estimate(200.0, 190.0, 210.0, 5), Estimate(100.0, 95.0, 105.0, 5)
    speedup = ratio_of(fast, base)
    assert speedup.value == 2.0
    assert speedup.low == pytest.approx(190 / 105) and speedup.high == pytest.approx(210 / 95)
    assert speed_verdict(speedup) == "faster"
    assert speed_verdict(ratio_of(Estimate(102.0, 90.0, 115.0, 5), base)) == "tie"
    unbounded = ratio_of(fast, Estimate(100.0, -math.inf, math.inf, 1))
    assert not unbounded.bounded and speed_verdict(unbounded) == "tie"


def test_a_difference_over_seeds_is_called_only_beyond_seed_noise():
    from versatil.stats import difference_ci

    rng = random.Random(3)
    misses = 0
    for _ in range(500):
        a = [rng.gauss(1.0, 0.1) for _ in range(4)]
        b = [rng.gauss(1.0, 0.1) for _ in range(3)]
        d = difference_ci(a, b)
        misses += not d.low <= 0 <= d.high  # the true difference is 0
    assert misses / 500 <= 0.08
    far = difference_ci([2.0, 2.1, 1.9], [1.0, 1.1, 0.9])
    assert far.low > 0 and far.value == pytest.approx(1.0)
    one_seed = difference_ci([2.0], [1.0, 1.1])
    assert not one_seed.bounded and one_seed.value == pytest.approx(0.95)
    exact = difference_ci([1.0, 1.0], [1.0, 1.0])
    assert (exact.low, exact.high) == (0.0, 0.0)


def test_a_paired_difference_cancels_what_the_seed_does():
    from versatil.stats import difference_ci, paired_difference_ci

    # Seeds differ a lot; each pair differs by about 0.01: paired, the spread is the pairs'.
    reference = [0.30, 0.45, 0.38, 0.52]
    values = [0.311, 0.459, 0.391, 0.529]
    paired = paired_difference_ci(values, reference)
    assert paired.value == pytest.approx(0.01) and paired.n == 4
    half = 3.182 * statistics.stdev(a - b for a, b in zip(values, reference, strict=True)) / 2
    assert paired.high - paired.value == pytest.approx(half, rel=1e-3)
    assert paired.low > 0  # beyond seed noise once paired
    unpaired = difference_ci(values, reference)
    assert unpaired.low < 0 < unpaired.high  # lost in seed-to-seed variation
    exact = paired_difference_ci([0.31, 0.47], [0.31, 0.47])
    assert (exact.value, exact.low, exact.high) == (0.0, 0.0, 0.0)
    assert not paired_difference_ci([0.3], [0.2]).bounded
    with pytest.raises(ValueError, match="one reference value per value"):
        paired_difference_ci([0.3, 0.4], [0.2])
    with pytest.raises(ValueError, match="at least one pair"):
        paired_difference_ci([], [])


def _decided(sd, margin, n, trials=40_000, seed=0):
    """How often n seeds' 95% t-interval clears a bound ``margin`` away, by simulation."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    draws = rng.normal(margin, sd, size=(trials, n))  # each seed's distance to the bound
    mean, s = draws.mean(axis=1), draws.std(axis=1, ddof=1)
    return float(np.mean(mean - stats.t.ppf(0.975, n - 1) * s / math.sqrt(n) > 0))


def test_seeds_to_decide_is_the_least_n_that_decides_with_80_percent_power():
    from versatil.stats import seeds_to_decide

    # The precision rule (an interval narrower than the margin) would say 5 seeds here,
    # which decide about 65% of the time; 80% needs 7.
    assert seeds_to_decide(1.0, 1.4) == 7
    for sd, margin in [(0.01, 0.008), (0.1, 0.05), (1.0, 0.9), (0.02, 0.5)]:
        n = seeds_to_decide(sd, margin)
        # Checked against simulated sweeps, not against the formula it uses.
        assert _decided(sd, margin, n) >= 0.8 - 0.01, (sd, margin, n)
        if n > 2:
            assert _decided(sd, margin, n - 1) < 0.8 + 0.01, (sd, margin, n)
    assert seeds_to_decide(0.01, 0.0) is None  # on the tolerance: no number of seeds decides
    assert seeds_to_decide(1.0, 1e-6, limit=100) is None
    assert seeds_to_decide(0.0, 0.01) == 2
