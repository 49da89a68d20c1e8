"""The trials a :class:`~versatil.sweep.config.post_training.Selection` picks to compress.

Pure functions on a sweep's rows; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from versatil.sweep.config.post_training import Selection
from versatil.sweep.results.ranking import pareto_front, ranked
from versatil.sweep.results.rows import TrialRow, finished

__all__ = ["select_pareto", "select_top", "select_trials"]


def select_pareto(rows: Sequence[TrialRow], mode: str) -> list[TrialRow]:
    """The comparable trials no other beats on both objective and throughput.

    This is the front the report marks (``*`` and ``P``): a trial stays unless another is at
    least as good on the objective and on ``samples_per_sec``, and better on one of them.
    Trials stopped early are not compared with those that trained the whole budget.
    """
    front = pareto_front(rows, mode)
    return [r for r in rows if finished(r) and r.trial_id in front]


def select_top(rows: Sequence[TrialRow], mode: str, k: int) -> list[TrialRow]:
    """The ``k`` best comparable trials by objective; a tie goes to higher ``samples_per_sec``."""
    return ranked(rows, mode)[:k]


def select_trials(rows: Sequence[TrialRow], mode: str, selection: Selection) -> list[TrialRow]:
    """The trials ``selection`` picks, best objective first (one trial for ``trial``)."""
    if selection.kind == "trial":
        return [r for r in rows if finished(r) and r.trial_id == selection.trial_id]
    if selection.kind == "top":
        return select_top(rows, mode, selection.k or 1)
    chosen = {r.trial_id for r in select_pareto(rows, mode)}
    return [r for r in select_top(rows, mode, len(rows)) if r.trial_id in chosen]
