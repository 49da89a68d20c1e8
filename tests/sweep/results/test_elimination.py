"""The race's elimination rule on synthetic rounds with known answers.

Each simulated round times the reference and a setting with shared noise (the machine's
drift, which pairing cancels) and their own noise; the setting's true speed ratio is
known. Seeded, so every run of the suite sees the same rounds.
"""

import math
import random

import pytest

from versatil.sweep.results.elimination import (
    EliminationRule,
    paired_ratios,
    screen_speedup,
    settled,
    tie_groups,
    to_drop,
)


def _rounds(
    rng: random.Random, ratios: dict[str, float], n: int, noise: float
) -> dict[str, list[float]]:
    """``n`` rounds of rates: the reference at 1000/s, each setting at its ratio of that.

    A round's shared factor (drift) multiplies everyone; each rate has its own lognormal
    noise of relative size ``noise``.
    """
    rates: dict[str, list[float]] = {"ref": [], **{k: [] for k in ratios}}
    for _ in range(n):
        shared = math.exp(rng.gauss(0, 0.2))
        rates["ref"].append(1000 * shared * math.exp(rng.gauss(0, noise)))
        for label, ratio in ratios.items():
            rates[label].append(1000 * ratio * shared * math.exp(rng.gauss(0, noise)))
    return rates


def test_the_rule_names_its_threshold_and_the_fewest_rounds_that_eliminate():
    rule = EliminationRule(alpha=0.05, contenders=6)
    assert rule.threshold == pytest.approx(120)
    # Straight losses multiply the evidence by 1.8: 1.8^8 = 110 < 120 <= 1.8^9 = 198.
    assert rule.straight_losses == 9
    assert rule.eliminated_at([0.9] * 8) is None
    assert rule.eliminated_at([0.9] * 9) == 9
    # A win costs evidence (x0.2): one win among the first nine rounds delays it.
    assert rule.eliminated_at([0.9] * 4 + [1.1] + [0.9] * 4) is None


def _screens_eliminating(seed: int, ratio: float, noise: float, screens: int) -> int:
    """Of ``screens`` simulated 12-round screens (5 settings raced), how many take it out."""
    rng = random.Random(seed)
    rule = EliminationRule(alpha=0.05, contenders=5)
    out = 0
    for _ in range(screens):
        rates = _rounds(rng, {"it": ratio}, 12, noise=noise)
        out += "it" in to_drop(rates, "ref", ["ref", "it"], rule)
    return out


def test_a_setting_much_slower_is_eliminated_within_the_rounds():
    assert _screens_eliminating(1, 1 / 1.3, noise=0.03, screens=200) == 200


def test_a_setting_two_percent_slower_inside_ten_percent_noise_is_not_eliminated():
    out = _screens_eliminating(2, 1 / 1.02, noise=0.10, screens=500)
    # Inside the noise a round is nearly a coin toss: the sign test rarely gets there.
    assert out / 500 < 0.05


def test_the_family_wise_error_under_the_null_is_at_most_alpha_over_many_races():
    """Six settings as fast as the reference, looked at after every one of 60 rounds."""
    rng = random.Random(3)
    alpha, races = 0.05, 2000
    rule = EliminationRule(alpha=alpha, contenders=6)
    labels = [f"s{i}" for i in range(6)]
    wrong = 0
    for _ in range(races):
        rates = _rounds(rng, dict.fromkeys(labels, 1.0), 60, noise=0.05)
        # any look eliminating any setting is an error: the rule is checked on every prefix
        wrong += any(rule.eliminated_at(paired_ratios(rates[s], rates["ref"])) for s in labels)
    # The bound is alpha; the binomial spread over 2000 races is about 0.005.
    assert wrong / races <= alpha


def test_a_setting_out_early_pairs_only_the_rounds_it_ran():
    assert paired_ratios([2.0, 2.0], [1.0, 1.0, 1.0, 1.0]) == [2.0, 2.0]
    assert paired_ratios([2.0, math.nan, 3.0], [1.0, 1.0, 0.0]) == [2.0]
    found = screen_speedup([2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])
    assert found is not None and found.value == 2.0 and found.n == 3
    assert screen_speedup([], [1.0]) is None


def test_tie_groups_split_where_neighbours_differ_beyond_noise():
    rng = random.Random(4)
    ratios = {"a": 1.5, "b": 1.49, "c": 1.2, "d": 0.95}
    rates = _rounds(rng, ratios, 12, noise=0.01)
    assert tie_groups(rates, "ref", ["ref", "a", "b", "c", "d"]) == [["a", "b"], ["c"], ["d"]]


def test_the_screen_settles_only_when_every_setting_racing_is_faster():
    rng = random.Random(5)
    rates = _rounds(rng, {"fast": 1.3, "tied": 1.0}, 6, noise=0.01)
    assert settled(rates, "ref", ["ref", "fast"], min_rounds=6)
    assert not settled(rates, "ref", ["ref", "fast", "tied"], min_rounds=6)
    short = {k: v[:5] for k, v in rates.items()}
    assert not settled(short, "ref", ["ref", "fast"], min_rounds=6)


@pytest.mark.parametrize(
    ("alpha", "contenders", "p1"), [(0.0, 3, 0.9), (0.05, 0, 0.9), (0.05, 3, 0.5)]
)
def test_the_rule_refuses_parameters_that_give_no_guarantee(alpha, contenders, p1):
    with pytest.raises(ValueError):
        EliminationRule(alpha=alpha, contenders=contenders, p1=p1)
