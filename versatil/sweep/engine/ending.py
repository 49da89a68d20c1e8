"""A sweep's last phases: its trials as rows, the verdict (re-timed), and its end logged.

:func:`judge_end` is the one end of a sweep, for ``run``, ``sync`` and ``confirm``: rows
judged, the settings in contention re-timed when asked. :func:`conclude_trials` gives it a
live sweep's rows, from Tune's results and records.
:func:`end_sweep` logs the end to MLflow, closes the sweep's run and marks it ended.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from versatil.errors import NO_SPACE, ConfigError, DiskFullError
from versatil.status import TrialStatus
from versatil.sweep.engine.conclude import conclude, sweep_reference
from versatil.sweep.engine.confirm import confirm_or_explain, in_contention
from versatil.sweep.engine.prepared import Prepared
from versatil.sweep.engine.race import read_screen
from versatil.sweep.engine.resume import mark_ended
from versatil.sweep.engine.tracker import SweepEnd, sweep_end
from versatil.sweep.plan import Plan
from versatil.sweep.results.confirmation import Candidate
from versatil.sweep.results.judgement import Judgement, judge
from versatil.sweep.results.race import compute_summary, race_summary
from versatil.sweep.results.records import TrialRecord, axes_of, read_trials
from versatil.sweep.results.rows import TrialRow, make_row
from versatil.sweep.storage import Storage
from versatil.sweep.tracking import TrackingGap, close_sweep
from versatil.sweep.vocab.keys import EPOCH

__all__ = [
    "Concluded",
    "Retime",
    "conclude_trials",
    "end_sweep",
    "judge_end",
    "rows_from_results",
    "sync_command",
]


@dataclasses.dataclass(frozen=True)
class Concluded:
    """A sweep's trials judged.

    Attributes:
        rows: One row per trial, in trial order.
        judgement: The best trial, the Pareto ranking and the verdict.
        records: Tune's records of the trials (every epoch each reported).
        confirmation: The re-timing's rounds, when the candidates were re-timed.
        missing: The first row whose module did not log the objective, else ``None``:
            the sweep stopped there.
        race: A race's screen and the settings it did not train
            (:func:`~versatil.sweep.results.race.race_summary`).
        compute: The sweep's device-seconds by phase
            (:func:`~versatil.sweep.results.race.compute_summary`).
    """

    rows: list[TrialRow]
    judgement: Judgement
    records: list[TrialRecord]
    confirmation: dict[str, Any] | None = None
    missing: TrialRow | None = None
    race: dict[str, Any] | None = None
    compute: dict[str, Any] | None = None

    def end(self) -> SweepEnd:
        """What MLflow records of this end: the verdict, tags, the re-timing's rounds."""
        return sweep_end(self.rows, self.judgement, self.confirmation, self.race, self.compute)


Retime = Callable[[list[Candidate]], "dict[str, Any] | None"]
"""Re-times the candidates; gives the rounds' document, or ``None`` when it failed."""


def judge_end(
    plan: Plan,
    rows: Sequence[TrialRow],
    records: Sequence[TrialRecord],
    retime: Retime | None = None,
    missing: TrialRow | None = None,
) -> Concluded:
    """The one end of a sweep, for ``run``, ``sync`` and ``confirm``: rows judged.

    The rows are judged once. With ``retime``, the settings in contention (when the
    sweep's ``confirm`` settings ask for it) are re-timed, every one of them (in groups of
    ``confirm.max_candidates``, each with the reference), and the verdict is made again
    with the rounds of all groups, which decide it.

    Args:
        plan: The sweep's plan.
        rows: One row per trial.
        records: Tune's records of them.
        retime: What re-times candidates; ``None`` keeps the trials' own timing.
        missing: The row whose module did not log the objective: nothing is re-timed.
    """
    rows, judgement = conclude(plan, rows, records)
    confirmation = None
    found = in_contention(plan, rows, judgement) if retime is not None and missing is None else []
    if found:
        confirmation = retime(found)
        if confirmation is not None:  # new measurements: the verdict is made with them
            objectives = plan.objectives
            target = judgement.verdict.target
            reference = sweep_reference(plan)
            judgement = judge(
                rows,
                list(objectives.objectives),
                objectives.tolerance,
                confirmation,
                target,
                reference,
            )
    return Concluded(rows, judgement, list(records), confirmation, missing)


def conclude_trials(
    plan: Plan, prepared: Prepared, results: Any, stream: TextIO | None
) -> Concluded:
    """Rows from Tune's results and records, judged; re-timed when in contention."""
    records = read_trials(prepared.storage.pull(prepared.name))
    rows = rows_from_results(results, plan, records, prepared.storage)
    missing = next((r for r in rows if r.report.stops_sweep), None)
    if missing is not None:
        rows = [r if r.report.status is not None else _not_run(r) for r in rows]

    def retime(found: list[Candidate]) -> dict[str, Any] | None:
        return confirm_or_explain(plan, found, stream or sys.stdout)

    concluded = judge_end(plan, rows, records, retime, missing)
    screen = read_screen(prepared.experiment_dir) if plan.search.algorithm == "race" else None
    answer = concluded.judgement.verdict.recommended_setting
    race = race_summary(screen, concluded.rows, answer) if screen is not None else None
    compute = compute_summary(
        concluded.rows,
        plan.resources.devices_per_trial,
        plan.planned_trials,
        screen,
        concluded.confirmation,
    )
    return dataclasses.replace(concluded, race=race, compute=compute)


def end_sweep(
    plan: Plan, prepared: Prepared, tracker: Any, concluded: Concluded
) -> TrackingGap | None:
    """Logs the sweep's end, closes its MLflow run and marks it ended on the storage path.

    Returns:
        What is not in MLflow yet (the store did not answer), or ``None``.

    Raises:
        ConfigError: when a trial met a problem every trial meets (the module did not log
            the objective; an endless epoch with no step budget): the sweep stopped there.
        DiskFullError: when a trial found no space left on its disk: the sweep stopped there.
    """
    rows = concluded.rows
    gap = close_sweep(tracker, rows, concluded.records, concluded.end(), sync_command(plan))
    storage, name = prepared.storage, prepared.name
    missing = concluded.missing
    full = missing is not None and missing.reason.startswith(NO_SPACE)
    if gap is None and not full:  # else its end is not in MLflow yet: --auto-resume logs it
        mark_ended(storage, name, tracker.context.parent_run_id, len(rows))
    if missing is not None:
        ran = sum(r.report.status is not None for r in rows)
        if full:
            raise DiskFullError(
                f"{missing.reason}. The sweep stopped at that result: every trial writes its "
                f"checkpoints there ({ran} of {plan.planned_trials} trials started); free space "
                "there (or give storage_path a larger disk), then run the sweep again"
            )
        raise ConfigError(
            f"{missing.reason}. The sweep stopped at that result: every trial runs the same "
            f"module and would meet it the same way ({ran} of {len(rows)} trials started); "
            f"its runs are under {storage.display(name)}"
        )
    return gap


def sync_command(plan: Plan) -> str:
    """The command that backfills this sweep's runs from its storage path."""
    storage = plan.trial.storage().location.display()
    return f"python -m versatil.sweep sync {plan.name} --storage-path {storage}"


def rows_from_results(
    results: Any,
    plan: Plan,
    records: Sequence[TrialRecord] = (),
    storage: Storage | None = None,
) -> list[TrialRow]:
    """Turns a Tune ResultGrid into summary rows, in trial order.

    Args:
        results: Tune's ResultGrid.
        plan: The sweep's plan.
        records: Tune's records of the same trials (:func:`read_trials`): every epoch a
            trial reported, before a restore too, where the grid holds the last run's.
        storage: The storage path; on object storage, a row's checkpoint is its place in
            the local mirror (see :mod:`versatil.sweep.storage`).
    """
    by_id = {record.trial_id: record for record in records}
    results = list(results)
    axes = axes_of(plan.axis_names, [result.config or {} for result in results])
    rows = []
    for result in results:
        metrics = dict(result.metrics or {})
        error = None
        if result.error is not None:
            error = str(result.error).strip() or type(result.error).__name__
        # The trial's directory is named after it (trial_dirname_creator).
        trial_id = Path(result.path).name if result.path else metrics.get("trial_id")
        trial_config = result.config or {}
        checkpoint = result.checkpoint.path if result.checkpoint else None
        if checkpoint is not None and storage is not None and storage.remote:
            checkpoint = str(storage.local_of(checkpoint))
        record = by_id.get(trial_id)
        if metrics.get("trial_id") not in (None, trial_id) and record and record.results:
            # PBT exploited the trial at its last report: Tune then holds the copied trial's
            # last result and checkpoint, and a mutated config never trained. The row is
            # the trial's own: its last result, the config it trained with, its checkpoint.
            metrics = dict(record.results[-1])
            trial_config = metrics.pop("config", None) or record.config
            checkpoint = record.checkpoint
        rows.append(
            make_row(
                trial_id=trial_id,
                config=trial_config,
                metrics=metrics,
                epochs=list(record.epochs() if record else ()) or _epochs_reported(result),
                error=error,
                checkpoint=checkpoint,
                axes=axes,
                objective=plan.objectives.metric,
            )
        )
    return sorted(rows, key=lambda r: r.trial_id)


def _epochs_reported(result: Any) -> list[int]:
    """The epochs a trial of a ResultGrid reported in its last run (the grid's history)."""
    frame = result.metrics_dataframe
    if frame is None or EPOCH not in frame:
        return []
    return [int(e) for e in frame[EPOCH].dropna()]


def _not_run(row: TrialRow) -> TrialRow:
    """A trial the sweep never started because it stopped early."""
    reason = "not run: the sweep stopped when the objective metric was found missing"
    return dataclasses.replace(row, status=TrialStatus.STOPPED, reason=reason)
