"""The race's screen: which settings are out, slower than the reference beyond chance.

Pure functions on the screen's rounds. In round ``i`` every setting still racing trained
the same steps on the same batches as the reference, back to back on one device, so
``rate[i] / reference[i]`` is one paired measurement of its speed ratio. A round the
setting loses (a ratio below 1) is a step of a sequential probability ratio test on the
sign of that ratio:

* under the null hypothesis that the setting is at least as fast as the reference (its
  per-round ratio's median is at least 1), it loses a round with probability at most 1/2,
  whatever the rounds before;
* under the alternative it loses with probability :attr:`EliminationRule.p1` (0.9).

The evidence against the null after ``n`` rounds is the likelihood ratio
``prod (2 p1)^loss (2 (1 - p1))^win``: a nonnegative supermartingale under the null, so by
Ville's inequality the chance that it *ever* reaches ``m / alpha`` is at most
``alpha / m``, however many rounds are looked at and whenever the screen stops. A setting
is eliminated the first time its evidence reaches ``m / alpha``, with ``m`` the settings
raced against the reference; by the union bound over the ``m``, the chance of eliminating
any setting that is not slower is at most ``alpha`` (family-wise, under repeated looks).
The test is on signs alone, so it holds for any distribution of the rounds' noise, as long
as each round, given the ones before, loses with probability at most 1/2 under the null
(the rounds' order alternates, and pairing cancels the machine's drift).

With the defaults, a setting that loses every round is out after
:attr:`EliminationRule.straight_losses` rounds (``ceil(log(m / alpha) / log(1.8))``: 9
for 6 settings at ``alpha = 0.05``); each round it wins multiplies its evidence by 0.2.

The settings still racing are ranked by their screen speedup (the median of their paired
ratios, :func:`versatil.stats.ratio_ci`) and split into tie groups: neighbours in that
order whose own paired ratio is a tie (:func:`versatil.stats.speed_verdict`) share a group.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from versatil.stats import EliminationRule, Estimate, ratio_ci, speed_verdict

__all__ = [
    "EliminationRule",
    "paired_ratios",
    "screen_speedup",
    "settled",
    "tie_groups",
    "to_drop",
]


def paired_ratios(rates: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Per-round speed ratios over the rounds both ran (a setting out stops early).

    A round without a positive, finite time on either side is left out.
    """
    out = []
    for mine, theirs in zip(rates, reference, strict=False):
        if all(math.isfinite(v) and v > 0 for v in (mine, theirs)):
            out.append(mine / theirs)
    return out


def screen_speedup(rates: Sequence[float], reference: Sequence[float]) -> Estimate | None:
    """The median paired ratio with its interval, or ``None`` without a shared round."""
    ratios = paired_ratios(rates, reference)
    if not ratios:
        return None
    return ratio_ci(ratios, [1.0] * len(ratios))


def to_drop(
    rates: Mapping[str, Sequence[float]],
    reference: str,
    racing: Collection[str],
    rule: EliminationRule,
) -> dict[str, int]:
    """The settings still racing that the rule eliminates now, with the round it did."""
    out = {}
    for label in racing:
        if label == reference:
            continue
        at = rule.eliminated_at(paired_ratios(rates[label], rates[reference]))
        if at is not None:
            out[label] = at
    return out


def settled(
    rates: Mapping[str, Sequence[float]],
    reference: str,
    racing: Collection[str],
    min_rounds: int,
) -> bool:
    """Whether the screen may stop: after ``min_rounds``, every setting racing is faster.

    Faster: its screen speedup's interval lies wholly above 1. A setting tied with the
    reference, or slower and not yet out, keeps racing (to the last round at most).
    """
    if len(rates[reference]) < min_rounds:
        return False
    for label in racing:
        if label == reference:
            continue
        found = screen_speedup(rates[label], rates[reference])
        if found is None or speed_verdict(found) != "faster":
            return False
    return True


def tie_groups(
    rates: Mapping[str, Sequence[float]], reference: str, racing: Collection[str]
) -> list[list[str]]:
    """The settings still racing, fastest first, in groups of settings tied with each other.

    Ranked by their screen speedup over the reference; each joins its faster neighbour's
    group when their own paired ratio is a tie. The reference is left out.
    """
    speeds = {}
    for label in racing:
        if label == reference:
            continue
        found = screen_speedup(rates[label], rates[reference])
        speeds[label] = found.value if found is not None else 0.0
    order = sorted(speeds, key=lambda label: (-speeds[label], label))
    out: list[list[str]] = []
    for label in order:
        if out:
            between = screen_speedup(rates[out[-1][-1]], rates[label])
            if between is None or speed_verdict(between) == "tie":
                out[-1].append(label)
                continue
        out.append([label])
    return out
