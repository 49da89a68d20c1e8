"""Which trials are best: one rank key, the best trial, the Pareto front and its marks.

A single objective is ranked by :func:`rank_key` (objective, then higher throughput, then
trial id); its front is the Pareto set of objective against ``samples_per_sec``, computed
by the same non-dominated sort (:mod:`~versatil.sweep.results.pareto`) that ranks a sweep
of several objectives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from versatil.stats import ROUNDING
from versatil.sweep.results.pareto import Ranking, non_dominated_sort
from versatil.sweep.results.rows import (
    TrialRow,
    finished,
    full_budget,
    throughput,
    timed_shared,
    value_of,
)
from versatil.sweep.vocab.direction import Direction
from versatil.training.metric_names import SAMPLES_PER_SEC

__all__ = [
    "best_on_front",
    "best_row",
    "comparable",
    "dominates_beyond_noise",
    "pareto_front",
    "pareto_marks",
    "rank_key",
    "ranked",
    "summary_marks",
]


def rank_key(row: TrialRow, mode: str) -> tuple[float, float, str]:
    """Sorts the best first: the objective, then higher throughput, then trial id.

    Objectives equal but for float rounding (:func:`~versatil.stats.same_value`) are one
    value here, so throughput decides between them: a float64 trial whose accuracy beats a
    float32 one's by 1e-8 (the same predictions) does not win on it.
    """
    return Direction(mode).as_loss(_rounded(float(row.objective))), -throughput(row), row.trial_id


def _rounded(value: float) -> float:
    """``value`` to the 6 significant digits :data:`~versatil.stats.ROUNDING` keeps."""
    if value == 0 or not math.isfinite(value):
        return value
    digits = -math.floor(math.log10(ROUNDING))
    return float(f"{value:.{digits}g}")


def comparable(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """The trials compared on the objective: those trained to the whole budget.

    A trial a scheduler stopped early trained less; it is compared only when no trial
    completed (a sweep whose every trial was stopped).
    """
    whole = [r for r in rows if full_budget(r)]
    return whole or [r for r in rows if finished(r)]


def ranked(rows: Sequence[TrialRow], mode: str) -> list[TrialRow]:
    """The comparable trials (:func:`comparable`), best first by :func:`rank_key`."""
    return sorted(comparable(rows), key=lambda r: rank_key(r, mode))


def best_row(rows: Sequence[TrialRow], mode: str) -> TrialRow | None:
    """The trial with the best finite objective among the comparable trials.

    Ties on the objective go to the higher ``samples_per_sec``, so the best trial is never
    dominated on objective and throughput.
    """
    best = ranked(rows, mode)
    return best[0] if best else None


def best_on_front(rows: Sequence[TrialRow], ranking: Ranking) -> TrialRow | None:
    """The Pareto-set trial best on the primary objective (ties: higher throughput)."""
    front = set(ranking.front)
    return best_row([r for r in rows if r.trial_id in front], ranking.objectives[0][1])


def pareto_front(rows: Sequence[TrialRow], mode: str) -> set[str]:
    """Trial ids on the Pareto front of objective vs ``samples_per_sec``.

    A trial is on the front when no other comparable trial (:func:`comparable`: a trial
    stopped early is not) is at least as good on both (a better or equal objective and at
    least its throughput) and strictly better on one.
    """
    direction = Direction(mode)
    points = {
        r.trial_id: (direction.as_loss(_rounded(float(r.objective))), -throughput(r))
        for r in comparable(rows)
        if throughput(r) != float("-inf")
    }
    fronts = non_dominated_sort(points)
    return set(fronts[0]) if fronts else set()


def summary_marks(rows: Sequence[TrialRow], mode: str, tolerance: float = 0.0) -> dict[str, str]:
    """``*`` the best trial, ``P`` the others on the Pareto front, ``~`` within noise of it.

    A trial off the front is within noise of it when no trial on the front dominates it
    beyond noise (:func:`dominates_beyond_noise`).
    """
    front = pareto_front(rows, mode)
    marks = dict.fromkeys(front, "P")
    by_id = {r.trial_id: r for r in rows}
    for row in comparable(rows):
        if row.trial_id not in front and not any(
            dominates_beyond_noise(by_id[f], row, mode, tolerance) for f in front
        ):
            marks[row.trial_id] = "~"
    best = best_row(rows, mode)
    if best is not None:
        marks[best.trial_id] = "*"
    return marks


def _speed(row: TrialRow) -> tuple[float, float]:
    """A trial's throughput interval; unbounded when too short to time, or timed shared."""
    low = value_of(row, f"{SAMPLES_PER_SEC}_ci_low")
    high = value_of(row, f"{SAMPLES_PER_SEC}_ci_high")
    too_short = row.metrics.get("throughput_too_short")
    if low is None or high is None or too_short or timed_shared(row):
        return -math.inf, math.inf
    return low, high


def dominates_beyond_noise(a: TrialRow, b: TrialRow, mode: str, tolerance: float) -> bool:
    """Whether ``a`` beats ``b`` on objective and speed beyond the tolerance and intervals.

    ``a`` is no worse on both (its objective at most ``tolerance`` worse, relative; its
    speed interval reaching ``b``'s) and better beyond noise on one: an objective better
    by more than the tolerance, or a speed interval wholly above ``b``'s.
    """
    gain = Direction(mode).as_loss(float(b.objective) - float(a.objective))  # > 0: a is better
    margin = tolerance * abs(float(b.objective))
    (a_low, a_high), (b_low, b_high) = _speed(a), _speed(b)
    no_worse = gain >= -margin and a_high >= b_low
    better = gain > margin or a_low > b_high
    return no_worse and better


def pareto_marks(rows: Sequence[TrialRow], ranking: Ranking) -> dict[str, str]:
    """``*`` for the best trial on the front, ``P`` for the rest of the Pareto set."""
    marks = dict.fromkeys(ranking.front, "P")
    best = best_on_front(rows, ranking)
    if best is not None:
        marks[best.trial_id] = "*"
    return marks
