"""A sweep's rows judged with everything its records add: the time to target, then the verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from versatil.sweep.plan import Plan
from versatil.sweep.results.answer import Setting
from versatil.sweep.results.judgement import Judgement, judge
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.target import apply_target
from versatil.sweep.results.verdict import reference_objective, setting_of

__all__ = ["conclude", "sweep_reference"]


def conclude(
    plan: Plan,
    rows: Sequence[TrialRow],
    records: Sequence[Any],
    confirmation: Mapping[str, Any] | None = None,
) -> tuple[list[TrialRow], Judgement]:
    """The rows with their ``time_to_target_s``, and their judgement.

    The target is ``objective.target``, else the reference setting's objective; the rows
    are judged once, with their times.

    Args:
        plan: The sweep's plan.
        rows: Its trials.
        records: Tune's records of them (each epoch's time and objective).
        confirmation: The re-timing's rounds, if the candidates were re-timed.
    """
    objective = plan.objectives
    setting = sweep_reference(plan)
    reference = None
    if objective.target is None:
        reference = reference_objective(rows, objective.metric, objective.mode, setting)
    timed, target = apply_target(
        rows,
        records,
        reference,
        objective.metric,
        objective.mode,
        objective.tolerance,
        objective.target,
    )
    judgement = judge(
        timed, list(objective.objectives), objective.tolerance, confirmation, target, setting
    )
    return timed, judgement


def sweep_reference(plan: Plan) -> Setting:
    """The sweep's reference setting: eager fp32, or its space's first listed values."""
    return setting_of(plan.reference.settings)
