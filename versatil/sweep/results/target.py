"""Time to target, MLPerf's time-to-train: when a trial's objective first reached a target.

A trial's ``time_to_target_s`` is its training wall time (the sum of its epochs'
``epoch_time_s``, validation left out) up to the end of the first epoch whose objective
reached the target, within the tolerance (relative): ``value <= target + tolerance *
|target|`` for a ``min`` objective. The target is ``objective.target`` in the sweep file,
or by default the reference's final objective (eager fp32's, its best configuration's mean
over seeds). A trial that never reached it has none, and its run says so: with a target,
every trial's run is tagged ``versatil.target_reached`` (``true`` or ``false``) and
``versatil.target`` (the target), see :func:`target_tags`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.sweep.results.rows import TrialRow
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.direction import Direction
from versatil.training.metric_names import EPOCH_TIME_S

__all__ = [
    "TIME_TO_TARGET",
    "apply_target",
    "histories",
    "reached",
    "target_tags",
    "time_to_target",
    "with_time_to_target",
]

TIME_TO_TARGET = "time_to_target_s"
"""The metric: training seconds until the objective first reached the target."""

History = list[tuple[float, float | None]]
"""A trial's epochs in order: (epoch_time_s, the objective's value)."""


def reached(value: float, target: float, mode: str, tolerance: float) -> bool:
    """Whether ``value`` reached ``target``, within ``tolerance`` of it (relative)."""
    margin = tolerance * abs(target)
    return Direction(mode).no_worse_than(value, target, margin)


def time_to_target(history: History, target: float, mode: str, tolerance: float) -> float | None:
    """The training seconds until the first epoch that reached ``target``; ``None`` if none did."""
    elapsed = 0.0
    for seconds, value in history:
        elapsed += seconds
        if value is not None and math.isfinite(value) and reached(value, target, mode, tolerance):
            return elapsed
    return None


def histories(records: Sequence[Any], metric: str) -> dict[str, History]:
    """Each recorded trial's epochs (Tune's records): their times and objective values."""
    out = {}
    for record in records:
        epochs = record.epochs()
        out[record.trial_id] = [
            (float(epochs[e].get(EPOCH_TIME_S) or 0.0), _number(epochs[e].get(metric)))
            for e in sorted(epochs)
        ]
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def with_time_to_target(
    rows: Sequence[TrialRow],
    found: Mapping[str, History],
    target: float,
    mode: str,
    tolerance: float,
) -> list[TrialRow]:
    """The rows, each with its ``time_to_target_s`` metric where its history reached it."""
    out = []
    for row in rows:
        seconds = time_to_target(found.get(row.trial_id, []), target, mode, tolerance)
        metrics = {k: v for k, v in row.metrics.items() if k != TIME_TO_TARGET}
        if seconds is not None:
            metrics[TIME_TO_TARGET] = seconds
        out.append(dataclasses.replace(row, metrics=metrics))
    return out


def apply_target(
    rows: Sequence[TrialRow],
    records: Sequence[Any],
    reference_objective: float | None,
    metric: str,
    mode: str,
    tolerance: float,
    explicit: float | None = None,
) -> tuple[list[TrialRow], float | None]:
    """The rows with their time to target, and the target (``explicit``, else the reference's).

    Args:
        rows: The trials.
        records: Tune's records of them (every epoch's time and objective).
        reference_objective: The reference setting's objective (the default target).
        metric: The primary objective.
        mode: Its mode.
        tolerance: How close to the target counts as reaching it (relative).
        explicit: ``objective.target`` from the sweep file.
    """
    target = explicit if explicit is not None else reference_objective
    if target is None or not math.isfinite(target):
        return list(rows), None
    return with_time_to_target(rows, histories(records, metric), target, mode, tolerance), target


def target_tags(rows: Sequence[TrialRow], target: float | None) -> dict[str, dict[str, str]]:
    """Each trial's run tags on the target, by trial id; none without a target.

    A trial whose ``time_to_target_s`` is absent never reached the target: its run says so
    (``versatil.target_reached``: ``false``) beside the target it was measured against, so
    the metric's absence is not mistaken for a missing measurement.
    """
    if target is None:
        return {}
    return {
        row.trial_id: {
            tags.TARGET_REACHED: str(TIME_TO_TARGET in row.metrics).lower(),
            tags.TARGET: repr(target),
        }
        for row in rows
    }
