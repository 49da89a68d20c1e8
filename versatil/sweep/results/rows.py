"""Rows of a sweep's results, and the table the CLI and the report print."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.results.pareto import Ranking
from versatil.tables import format_table

__all__ = ["TrialRow", "best_on_front", "best_row", "pareto_marks", "summary_table"]

SETTINGS_COLUMNS = ("precision", "compile_mode", "matmul_precision")
THROUGHPUT_COLUMNS = ("samples_per_sec", "epoch_time_s", "peak_memory_mb", "compile_time_s")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialRow:
    """One trial as the summary shows it.

    Attributes:
        trial_id: Ray Tune's trial id.
        axes: The trial's values on every axis of the space.
        status: completed, stopped, infeasible, diverged or failed.
        objective: The objective's last value (``None`` when there is none).
        metrics: The last reported metrics (throughput among them).
        epochs: Epochs the trial trained.
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


def best_row(rows: Sequence[TrialRow], mode: str) -> TrialRow | None:
    """The trial with the best finite objective among completed or stopped trials.

    Ties on the objective go to the higher ``samples_per_sec``, so the best trial is never
    dominated on objective and throughput.
    """
    ranked = [
        r
        for r in rows
        if TrialStatus(r.status).ranked and r.objective is not None and math.isfinite(r.objective)
    ]
    if not ranked:
        return None
    sign = 1.0 if mode == "min" else -1.0
    return min(ranked, key=lambda r: (sign * r.objective, -_throughput(r), r.trial_id))


def _throughput(row: TrialRow) -> float:
    value = row.metrics.get("samples_per_sec")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else -math.inf


def best_on_front(rows: Sequence[TrialRow], ranking: Ranking) -> TrialRow | None:
    """The Pareto-set trial best on the primary objective (ties: higher throughput)."""
    front = set(ranking.front)
    return best_row([r for r in rows if r.trial_id in front], ranking.objectives[0][1])


def summary_table(
    rows: Sequence[TrialRow],
    objective: str,
    marks: dict[str, str] | None = None,
    *,
    other_objectives: Sequence[str] = (),
    ranks: dict[str, int] | None = None,
) -> str:
    """A fixed-width text table: settings, other axes, objective, throughput, status.

    Args:
        rows: The trials.
        objective: The (primary) objective metric's name (a column header).
        marks: Optional one-character marks per trial id (``*`` best, ``P`` Pareto).
        other_objectives: Further objective metrics, shown after the primary one.
        ranks: Optional Pareto rank per trial id (a ``rank`` column).
    """
    axis_names = [c for c in SETTINGS_COLUMNS if any(c in r.axes for r in rows)]
    axis_names += sorted({k for r in rows for k in r.axes} - set(SETTINGS_COLUMNS))
    extra = [m for m in other_objectives if m not in THROUGHPUT_COLUMNS and m != objective]
    rank_header = ["rank"] if ranks is not None else []
    headers = [
        "",
        *rank_header,
        "trial",
        *axis_names,
        objective,
        *extra,
        *THROUGHPUT_COLUMNS,
        "epochs",
        "status",
    ]
    table = [
        [
            (marks or {}).get(row.trial_id, ""),
            *([ranks.get(row.trial_id)] if ranks is not None else []),
            row.trial_id,
            *(row.axes.get(a) for a in axis_names),
            row.objective,
            *(row.metrics.get(m) for m in extra),
            *(row.metrics.get(c) for c in THROUGHPUT_COLUMNS),
            row.epochs,
            row.status + (f": {row.reason}" if row.reason else ""),
        ]
        for row in rows
    ]
    return format_table(headers, table)


def pareto_front(rows: Sequence[TrialRow], mode: str) -> set[str]:
    """Trial ids on the Pareto front of objective vs ``samples_per_sec``.

    A trial is on the front when no other trial is at least as good on both (a better or
    equal objective and at least its throughput) and strictly better on one.
    """
    sign = 1.0 if mode == "min" else -1.0
    points = {
        r.trial_id: (sign * r.objective, -float(r.metrics["samples_per_sec"]))
        for r in rows
        if TrialStatus(r.status).ranked
        and r.objective is not None
        and math.isfinite(r.objective)
        and r.metrics.get("samples_per_sec") is not None
    }
    return {
        trial
        for trial, (a, b) in points.items()
        if not any(
            (c <= a and d <= b) and (c < a or d < b)
            for other, (c, d) in points.items()
            if other != trial
        )
    }


def summary_marks(rows: Sequence[TrialRow], mode: str) -> dict[str, str]:
    """``*`` for the best trial, ``P`` for the others on the Pareto front."""
    marks = {trial: "P" for trial in pareto_front(rows, mode)}
    best = best_row(rows, mode)
    if best is not None:
        marks[best.trial_id] = "*"
    return marks


def pareto_marks(rows: Sequence[TrialRow], ranking: Ranking) -> dict[str, str]:
    """``*`` for the best trial on the front, ``P`` for the rest of the Pareto set."""
    marks = dict.fromkeys(ranking.front, "P")
    best = best_on_front(rows, ranking)
    if best is not None:
        marks[best.trial_id] = "*"
    return marks
