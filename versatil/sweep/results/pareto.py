"""The Pareto set of a multi-objective sweep, ranked by non-dominated sorting and crowding.

Pure functions on numbers: a point is a trial's objective values, each turned to "lower
is better" (a ``max`` objective is negated). Trials are ranked as NSGA-II does: by
non-domination level (1 is the Pareto set), then by crowding distance (the more isolated
first), then by throughput (``samples_per_sec``, higher first), then by trial id.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.results.rows import full_budget, value_of
from versatil.sweep.vocab.direction import Direction
from versatil.training.metric_names import SAMPLES_PER_SEC

__all__ = [
    "THROUGHPUT",
    "Ranking",
    "crowding_distance",
    "dominates",
    "non_dominated_sort",
    "rank_rows",
]

THROUGHPUT = SAMPLES_PER_SEC
"""The metric that breaks ties: steady-state throughput, higher is better."""

Point = Sequence[float]


def dominates(a: Point, b: Point) -> bool:
    """Whether ``a`` is no worse than ``b`` everywhere and better somewhere (lower is better)."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True)
    )


def non_dominated_sort(points: Mapping[str, Point]) -> list[list[str]]:
    """The fronts of ``points``: the first is the non-dominated set, then the next, and so on."""
    left = dict(points)
    fronts = []
    while left:
        front = [k for k, p in left.items() if not any(dominates(q, p) for q in left.values())]
        fronts.append(sorted(front))
        for key in front:
            del left[key]
    return fronts


def crowding_distance(front: Sequence[str], points: Mapping[str, Point]) -> dict[str, float]:
    """NSGA-II's crowding distance in one front: the extremes of each objective get ``inf``."""
    distance = dict.fromkeys(front, 0.0)
    if not front:
        return distance
    for axis in range(len(points[front[0]])):
        ordered = sorted(front, key=lambda k: (points[k][axis], k))
        low, high = points[ordered[0]][axis], points[ordered[-1]][axis]
        distance[ordered[0]] = distance[ordered[-1]] = math.inf
        if high == low:
            continue
        for before, key, after in zip(ordered, ordered[1:], ordered[2:], strict=False):
            distance[key] += (points[after][axis] - points[before][axis]) / (high - low)
    return distance


@dataclasses.dataclass(frozen=True)
class Ranking:
    """The finished trials of a sweep, ranked.

    Attributes:
        objectives: ``(metric, mode)`` of each objective, the primary first.
        order: Finished trial ids, best first.
        level: Each finished trial's non-domination level; 1 is the Pareto set.
        crowding: Each finished trial's crowding distance within its level.
        left_out: Trials not ranked, with why (stopped early, failed, no value).
    """

    objectives: list[tuple[str, str]]
    order: list[str]
    level: dict[str, int]
    crowding: dict[str, float]
    left_out: dict[str, str]

    @property
    def front(self) -> list[str]:
        """The Pareto set, in rank order."""
        return [t for t in self.order if self.level[t] == 1]

    @property
    def rank(self) -> dict[str, int]:
        """Each finished trial's place in :attr:`order`, from 1."""
        return {trial: place for place, trial in enumerate(self.order, 1)}


def rank_rows(rows: Sequence[Any], objectives: Sequence[tuple[str, str]]) -> Ranking:
    r"""Ranks the trials that finished (status completed) with a finite value of every objective.

    Args:
        rows: The sweep's :class:`~versatil.sweep.results.rows.TrialRow`\ s.
        objectives: ``(metric, mode)`` pairs.
    """
    points: dict[str, list[float]] = {}
    left_out = {}
    for row in rows:
        values = [value_of(row, metric) for metric, _ in objectives]
        if full_budget(row) and None not in values:
            directions = [Direction(mode) for _, mode in objectives]
            points[row.trial_id] = [d.as_loss(v) for d, v in zip(directions, values, strict=True)]
        elif row.status == TrialStatus.STOPPED:
            left_out[row.trial_id] = "stopped early by the scheduler: did not finish"
        elif row.status != TrialStatus.COMPLETED:
            left_out[row.trial_id] = str(row.status)
        else:
            missing = [m for (m, _), v in zip(objectives, values, strict=True) if v is None]
            left_out[row.trial_id] = f"no finite {', '.join(missing) or objectives[0][0]}"
    throughput = {r.trial_id: value_of(r, THROUGHPUT) or 0.0 for r in rows}
    level: dict[str, int] = {}
    crowding: dict[str, float] = {}
    for depth, front in enumerate(non_dominated_sort(points), 1):
        level.update(dict.fromkeys(front, depth))
        crowding.update(crowding_distance(front, points))
    order = sorted(points, key=lambda t: (level[t], -crowding[t], -throughput[t], t))
    return Ranking(list(objectives), order, level, crowding, left_out)
