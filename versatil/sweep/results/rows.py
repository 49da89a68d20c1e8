"""A sweep's rows: one type, one builder, one definition of "finished".

A :class:`TrialRow` is one trial as every table, ranking and verdict sees it, however it
was read: from Tune's result grid at the end of a sweep, from Tune's records on disk, or
back from MLflow. All three build it with :func:`make_row`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.vocab.report import TrialReport
from versatil.training.metric_names import (
    DEVICE_TRIALS_MAX,
    SAMPLES_PER_SEC,
    THROUGHPUT_METRICS,
    THROUGHPUT_SHARED,
)
from versatil.training.spec import SETTING_ENUMS

__all__ = [
    "SETTINGS_COLUMNS",
    "THROUGHPUT_COLUMNS",
    "TrialRow",
    "finished",
    "full_budget",
    "make_row",
    "throughput",
    "timed_shared",
    "value_of",
]

SETTINGS_COLUMNS = tuple(SETTING_ENUMS)
"""The settings axes, in the tables' order: precision, compile mode, matmul precision."""

THROUGHPUT_COLUMNS = THROUGHPUT_METRICS
"""The measurements every table shows beside the objective."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialRow:
    """One trial as the summary shows it.

    Attributes:
        trial_id: Ray Tune's trial id.
        axes: The trial's values on every axis of the space.
        status: completed, stopped, infeasible, diverged or failed.
        objective: The objective's last value (``None`` when there is none).
        metrics: The last reported metrics (throughput among them).
        epochs: Epochs the trial trained: its last reported epoch (0-based) plus one.
        reason: Why a trial was infeasible or failed.
        checkpoint: The trial's latest checkpoint directory.
    """

    trial_id: str
    axes: dict[str, Any]
    status: TrialStatus
    objective: float | None
    metrics: dict[str, Any]
    epochs: int
    reason: str = ""
    checkpoint: str | None = None

    @property
    def report(self) -> TrialReport:
        """The trial's last result as the worker's typed report (:class:`TrialReport`)."""
        return TrialReport.from_dict(self.metrics)


def make_row(
    *,
    trial_id: str,
    config: Mapping[str, Any],
    metrics: Mapping[str, Any],
    epochs: Iterable[int],
    axes: Sequence[str],
    objective: str,
    error: str | None = None,
    checkpoint: str | None = None,
    ended: bool = True,
    status: TrialStatus | None = None,
    reason: str | None = None,
) -> TrialRow:
    """A summary row from a trial's last result and how it ended.

    Args:
        trial_id: Tune's trial id.
        config: The trial's config (its values on the axes).
        metrics: Its last result (empty when it never reported).
        epochs: The epochs it reported. It trained up to the last of them: an epoch
            retried after a restore counts once, and a report a crash lost still counts.
        axes: The sweep's axes.
        objective: The primary objective's metric.
        error: Why Tune recorded it as errored, or ``None`` when it did not error.
        checkpoint: Its newest checkpoint directory.
        ended: Whether the trial is over; a trial still going keeps ``running``.
        status: Its status when a store already says it (MLflow's tag); by default it is
            read from the last result and how the trial ended. A result without a status
            (:attr:`~versatil.sweep.vocab.report.TrialReport.status` ``None``) is a trial
            still going when it has not ended, else a failed one.
        reason: Its reason when a store already says it; by default the result's.
    """
    metrics = dict(metrics)
    report = TrialReport.from_dict(metrics)
    if status is None:
        status = report.status or TrialStatus.FAILED
        if error is not None:
            status = TrialStatus.FAILED
        elif not ended and report.status is None:
            status = TrialStatus.RUNNING  # pending, or started and not reported yet
        elif status == TrialStatus.RUNNING and ended:
            status = TrialStatus.STOPPED  # the scheduler ended it before max_epochs
    if reason is None:
        reason = report.reason
        if error and not reason:
            reason = error.strip().splitlines()[-1][:200]
    value = metrics.get(objective)
    return TrialRow(
        trial_id=trial_id,
        axes={k: config.get(k) for k in axes},
        status=TrialStatus(status),
        objective=float(value) if value is not None else None,
        metrics=metrics,
        epochs=max((int(e) + 1 for e in epochs), default=0),
        reason=reason,
        checkpoint=checkpoint or report.facts.get("checkpoint_path"),
    )


def value_of(row: TrialRow, metric: str) -> float | None:
    """A metric of the row as a finite float, or ``None`` (missing, not a number, NaN, inf)."""
    value = row.metrics.get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def throughput(row: TrialRow) -> float:
    """The row's ``samples_per_sec``; ``-inf`` when it has none, so it sorts last."""
    value = value_of(row, SAMPLES_PER_SEC)
    return -math.inf if value is None else value


def timed_shared(row: TrialRow) -> bool:
    """Whether the trial's throughput was timed while other trials shared its GPU.

    Its fit's ``throughput_shared``, or its last epoch's ``device_trials_max`` above 1 (a
    row of only the last epoch's metrics).
    """
    most = value_of(row, DEVICE_TRIALS_MAX)
    return bool(value_of(row, THROUGHPUT_SHARED)) or (most is not None and most > 1)


def finished(row: TrialRow) -> bool:
    """Whether the trial trained to a finite objective: completed, or stopped by a scheduler."""
    return (
        TrialStatus(row.status).ranked
        and row.objective is not None
        and math.isfinite(row.objective)
    )


def full_budget(row: TrialRow) -> bool:
    """Whether the trial finished its whole budget (not stopped early by a scheduler).

    Only such trials are compared on their objectives where budgets must be equal: the
    Pareto ranking of several objectives and the verdict.
    """
    return finished(row) and row.status == TrialStatus.COMPLETED
