"""A setting's objective against the reference's: paired by seed, judged non-inferior.

Pure functions on two configurations' trials (a setting's best configuration and the
reference's). With ``replicates``, replicate k of every configuration trains with the same
seed (``trainer.seed + k``: the same initialisation and data order), so where the two
configurations share at least two seeds their change is the mean of the per-seed
differences, with a Student-t interval over them (common random numbers: what a seed does
cancels, and identical per-seed objectives give exactly 0 ± 0). Elsewhere the change is
Welch's unpaired interval over the two sets of seeds, and it says so.

"No worse" is a non-inferiority claim at ``tolerance`` (relative): with an interval over
two seeds or more, a setting is ``no worse`` only when the worse end of its change's
interval lies within the tolerance, ``worse`` when even the better end lies beyond it, and
``undecided`` when the interval straddles it (with how many seeds would decide it, 80% power).
With one seed, the point estimate against the tolerance is the rule.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from versatil.stats import (
    Estimate,
    difference_ci,
    mean_ci,
    paired_difference_ci,
    same_value,
    seeds_to_decide,
)
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.keys import SEED

__all__ = [
    "NO_WORSE",
    "UNDECIDED",
    "WORSE",
    "ObjectiveChange",
    "objective_call",
    "objective_change",
]

NO_WORSE = "no worse"
UNDECIDED = "undecided"
WORSE = "worse"


@dataclasses.dataclass(frozen=True)
class ObjectiveChange:
    """A configuration's objective, and its change from the reference's.

    Attributes:
        objective: Its mean over seeds, with a Student-t interval.
        change: The difference from the reference's mean, relative to it, with its
            interval; ``None`` when the reference's objective is 0.
        paired: Whether ``change`` is over per-seed differences (else Welch's).
        spread: The per-seed standard deviation behind ``change``'s interval, relative
            (of the differences when paired; else both sides' combined); ``None`` with
            fewer than two seeds on a side.
    """

    objective: Estimate
    change: Estimate | None
    paired: bool
    spread: float | None


def _by_seed(rows: Sequence[TrialRow]) -> dict[str, float] | None:
    """Each trial's objective by its seed; ``None`` when a seed is missing or repeated."""
    seeds = [row.axes.get(SEED) for row in rows]
    if None in seeds or len({repr(s) for s in seeds}) != len(seeds):
        return None
    return {repr(s): float(row.objective) for s, row in zip(seeds, rows, strict=True)}  # type: ignore[arg-type]


def _common_seeds(
    mine: Sequence[TrialRow], theirs: Sequence[TrialRow]
) -> tuple[list[float], list[float]] | None:
    """Both sides' objectives on the seeds they share, in one order; ``None`` below two."""
    ours, reference = _by_seed(mine), _by_seed(theirs)
    if ours is None or reference is None:
        return None
    common = sorted(ours.keys() & reference.keys())
    if len(common) < 2:
        return None
    return [ours[s] for s in common], [reference[s] for s in common]


def objective_change(mine: Sequence[TrialRow], theirs: Sequence[TrialRow]) -> ObjectiveChange:
    """``mine``'s objective and its change from ``theirs``, paired by seed where they line up.

    Paired over the seeds both trained with when they share two or more (a Student-t
    interval over the per-seed differences); else Welch's unpaired interval. Means equal
    but for float rounding give a change of exactly 0.
    """
    values = [float(r.objective) for r in mine]  # type: ignore[arg-type]
    reference = [float(r.objective) for r in theirs]  # type: ignore[arg-type]
    objective = mean_ci(values)
    scale = abs(statistics.fmean(reference))
    if scale == 0:
        return ObjectiveChange(objective, None, False, None)
    pairs = _common_seeds(mine, theirs)
    if pairs is not None:
        diff = paired_difference_ci(*pairs)
        spread: float | None = statistics.stdev(a - b for a, b in zip(*pairs, strict=True))
    else:
        diff = difference_ci(values, reference)
        both = len(values) > 1 and len(reference) > 1
        spread = (
            math.sqrt(statistics.variance(values) + statistics.variance(reference))
            if both
            else None
        )
    if same_value(statistics.fmean(values), statistics.fmean(reference)):
        diff = Estimate(0.0, min(diff.low, 0.0), max(diff.high, 0.0), diff.n, None, diff.coverage)
    change = Estimate(diff.value / scale, diff.low / scale, diff.high / scale, diff.n)
    return ObjectiveChange(
        objective, change, pairs is not None, None if spread is None else spread / scale
    )


def objective_call(found: ObjectiveChange, mode: str, tolerance: float) -> tuple[str, int | None]:
    """Non-inferiority at ``tolerance``: the call, and for ``undecided`` the seeds to decide.

    With a bounded interval (two seeds or more), ``no worse`` when its worse end lies
    within the tolerance, ``worse`` when its better end lies beyond it, else
    ``undecided``; with one seed, the point estimate against the tolerance. The seeds that
    would decide an undecided call: the least ``n`` whose Student-t interval, at the
    observed per-seed spread, clears the tolerance with 80% power when the change truly
    lies where it was estimated (:func:`~versatil.stats.seeds_to_decide`; more than the
    seeds already run).
    """
    change = found.change
    if change is None:
        return NO_WORSE, None
    direction = Direction(mode)
    if not change.bounded:
        return (NO_WORSE if direction.as_loss(change.value) <= tolerance else WORSE), None
    worse_end = max(direction.as_loss(change.low), direction.as_loss(change.high))
    better_end = min(direction.as_loss(change.low), direction.as_loss(change.high))
    if worse_end <= tolerance:
        return NO_WORSE, None
    if better_end > tolerance:
        return WORSE, None
    if found.spread is None:
        return UNDECIDED, None
    needed = seeds_to_decide(found.spread, abs(tolerance - direction.as_loss(change.value)))
    return UNDECIDED, None if needed is None else max(needed, change.n + 1)
