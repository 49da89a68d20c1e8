"""MLflow as an exactly-once projection of what Tune recorded.

:func:`backfill` logs each (trial, metric, epoch) of Tune's records the trial's run does
not hold yet, and ends the runs of trials Tune recorded as over; :func:`close_sweep` does
that at the end of a sweep, then logs checkpoints and the judgement and ends the parent
run. Both are idempotent: a resumed driver, a ``sync`` and a second end of sweep (the
driver killed during the first) add only what is missing. When the store does not answer,
:func:`close_sweep` returns what is not in it yet instead of failing the sweep.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from versatil.status import MLFLOW_FINISHED, MLFLOW_KILLED, MLFLOW_RUNNING, TrialStatus
from versatil.sweep.plan.records import Where
from versatil.sweep.storage import local_checkpoint
from versatil.sweep.tracking.child_run import log_checkpoint
from versatil.sweep.tracking.live import SweepTracker
from versatil.sweep.tracking.logged_models import log_trial_model
from versatil.sweep.tracking.registry import (
    ALIASES,
    RECOMMENDED_ALIAS,
    drop_aliases,
    register_model,
)
from versatil.sweep.tracking.store import child_runs
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import CHECKPOINT_ARTIFACT

__all__ = [
    "Backfilled",
    "SweepEnd",
    "TrackingGap",
    "backfill",
    "close_runs",
    "close_sweep",
    "end_unrecorded",
    "log_end",
]

log = logging.getLogger(__name__)

UNRECORDED = (
    "lost before Tune saved its state (its driver or head node died first): the resumed "
    "sweep ran this configuration again as a new trial, whose run holds its results"
)
"""The reason on the run of a trial Tune's saved state never held."""


@dataclasses.dataclass
class Backfilled:
    """What a backfill added to the store.

    Attributes:
        epochs: (trial id, epoch) pairs of which at least one metric was logged.
        runs_created: Trials that had no run yet.
        runs_ended: Trials whose run got its final status.
        parent_ended: Whether the parent run was ended (:func:`close_runs`).
    """

    epochs: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    runs_created: list[str] = dataclasses.field(default_factory=list)
    runs_ended: list[str] = dataclasses.field(default_factory=list)
    parent_ended: bool = False


@dataclasses.dataclass(frozen=True)
class TrackingGap:
    """What is not in the tracking store after a sweep, because the store did not answer.

    Attributes:
        tracking_uri: The store.
        reason: Its last failure.
        missing: Trial id -> what its run lacks (epochs, its end).
        sync_command: The command that backfills it once the store answers.
    """

    tracking_uri: str
    reason: str
    missing: dict[str, str]
    sync_command: str

    def message(self) -> str:
        """One paragraph: what is missing, where the results are, how to sync them."""
        listed = "; ".join(f"{trial}: {what}" for trial, what in sorted(self.missing.items()))
        listed = listed or "the parent run's summary and end"
        return (
            f"MLflow at {self.tracking_uri} failed at the end of the sweep "
            f"({self.reason}). The results above come from Tune's records. Not in MLflow "
            f"yet: {listed}. Nothing is lost: once the "
            f"store answers, run `{self.sync_command}`"
        )


def backfill(tracker: SweepTracker, records: Sequence[Any], *, close: bool) -> Backfilled:
    """Logs what the store lacks of Tune's records, trial by trial.

    Args:
        tracker: Holds the store, the parent run and the runs already open.
        records: ``TrialRecord``s from :func:`versatil.sweep.results.records.read_trials`.
        close: End the runs of trials Tune recorded as over (with their final status);
            ``False`` while the sweep goes on.
    """
    done = Backfilled()
    for record in records:
        epochs = record.epochs()
        known = record.trial_id in tracker.children
        if not epochs and not (close and record.ended):
            continue  # nothing reported yet: its run opens with its first result
        child = tracker.child(record.trial_id, record.trial_id, record.config)
        if not known and not child.steps and not child.ended:
            done.runs_created.append(record.trial_id)
        for epoch, result in sorted(epochs.items()):
            if child.log_epoch(result):
                done.epochs.append((record.trial_id, epoch))
        if close and record.ended and not child.ended:
            row = record.row(tracker.context.objective)
            child.finish(row.status, row.reason)
            done.runs_ended.append(record.trial_id)
    return done


def _fetched(checkpoint: str) -> Path | None:
    """The checkpoint directory, fetched first from object storage; ``None`` if it is gone.

    A store that fails here is not the tracking store failing: the checkpoint is left out
    of MLflow with a warning, and the run keeps everything else.
    """
    try:
        local = local_checkpoint(checkpoint)
    except OSError as error:  # pyarrow's errors included
        log.warning("checkpoint %s not logged: the storage path failed (%s)", checkpoint, error)
        return None
    return local if local.is_dir() and any(p.is_file() for p in local.iterdir()) else None


def _log_checkpoint_once(client: Any, run_id: str, checkpoint_dir: Path) -> None:
    """Logs the directory unless the run holds every file of it, at its size."""
    held = {f.path: f.file_size for f in client.list_artifacts(run_id, CHECKPOINT_ARTIFACT)}
    files = [p for p in checkpoint_dir.iterdir() if p.is_file()]
    if files and all(
        held.get(f"{CHECKPOINT_ARTIFACT}/{p.name}") == p.stat().st_size for p in files
    ):
        return
    log_checkpoint(client, run_id, str(checkpoint_dir))


@dataclasses.dataclass(frozen=True)
class SweepEnd:
    """What the end of a sweep writes besides each trial's run and status.

    Attributes:
        best: The best row, if any (its checkpoint is logged, and registered if asked).
        summary: The summary text, logged to the parent run.
        child_tags: Tags per trial id (the Pareto ranking).
        parent_tags: Tags of the parent run (the verdict).
        parent_metrics: Metric series of the parent run, one value per step.
        child_metrics: Metric series per trial id, one value per step.
        parent_documents: JSON documents logged to the parent run, by artifact file.
        recommended: The trial id of the recommended setting's best trial, if any (its
            logged model is registered when ``mlflow.register`` asks).
        recommended_tags: Tags of its registered version: the setting, its speedup with
            the interval, the objective.
        aliases: The registered model's other aliases (``fastest``, ``most-accurate``),
            each the trial id whose logged model's version it points at.
        version_tags: Tags of those trials' versions, by trial id.
    """

    best: Any | None
    summary: str
    child_tags: Mapping[str, Mapping[str, str]]
    parent_tags: Mapping[str, str]
    parent_metrics: Mapping[str, Sequence[float]] = dataclasses.field(default_factory=dict)
    child_metrics: Mapping[str, Mapping[str, Sequence[float]]] = dataclasses.field(
        default_factory=dict
    )
    parent_documents: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    recommended: str | None = None
    recommended_tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    version_tags: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)


def _aliased(end: SweepEnd) -> dict[str, list[str]]:
    """The aliases to set, by the trial id they point at (``recommended`` first)."""
    named = {RECOMMENDED_ALIAS: end.recommended, **end.aliases}
    found: dict[str, list[str]] = {}
    for alias, trial in named.items():
        if trial is not None:
            found.setdefault(trial, []).append(alias)
    return found


def _log_series(client: Any, run_id: str, series: Mapping[str, Sequence[float]]) -> None:
    """Logs metric series (step = index) in batches of MLflow's 1000 metrics a request."""
    from mlflow.entities import Metric

    stamp = int(time.time() * 1000)
    metrics = [
        Metric(name, float(value), stamp, step)
        for name, values in series.items()
        for step, value in enumerate(values)
    ]
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start : start + 1000])


def close_sweep(
    tracker: SweepTracker,
    rows: Sequence[Any],
    records: Sequence[Any],
    end: SweepEnd,
    sync_command: str,
) -> TrackingGap | None:
    """The end of a sweep in the store; ``None`` when it is all there, else what is not.

    Backfills every epoch and ends every run from Tune's records (a driver killed before
    it logged them, an outage), logs the chosen checkpoints (``mlflow.log_checkpoints``),
    each completed trial's also as an MLflow logged model, registers the recommended
    setting's (``mlflow.register``), sets the Pareto and verdict tags,
    and ends the parent run with the summary.

    Args:
        tracker: The sweep's tracker (its queue is drained first).
        rows: The trials' summary rows (their final status and reason).
        records: Tune's records of the same trials.
        end: The best trial, the summary and the tags.
        sync_command: What to run later, when the store does not answer now.
    """
    tracker.drain()
    gap = TrackingGap(
        tracking_uri=tracker.context.tracking_uri,
        reason="",
        missing={},
        sync_command=sync_command,
    )
    if tracker.down_since is not None and not tracker.answers_again(now=True):
        return dataclasses.replace(gap, reason=tracker.outage, missing=tracker.unlogged(records))
    try:
        close_runs(tracker, rows, records, end)
    except Exception as error:
        tracker.failed(error)
        return dataclasses.replace(gap, reason=tracker.outage, missing=tracker.unlogged(records))
    return None


def end_unrecorded(client: Any, runs: Sequence[Any], trial_ids: set[str]) -> list[str]:
    """Ends and deletes those of the sweep's child ``runs`` whose trials Tune does not hold.

    A trial started just before its driver (or the head node it ran on) was lost, and
    after Tune last saved its state, is unknown to the resumed sweep: Tune runs its
    configuration again under a new trial id. The first run is ended ``KILLED``, given the
    reason, and deleted (MLflow keeps deleted runs until ``mlflow gc``), so the sweep holds
    one run per trial.

    Returns:
        The trial ids whose runs were ended.
    """
    ended = []
    for run in runs:
        trial_id = run.data.tags.get(tags.TRIAL_ID)
        if trial_id is None or trial_id in trial_ids:
            continue
        if run.info.status == MLFLOW_RUNNING:
            client.set_tag(run.info.run_id, tags.STATUS, "lost")
            client.set_tag(run.info.run_id, tags.REASON, UNRECORDED)
            client.set_terminated(run.info.run_id, MLFLOW_KILLED)
        client.delete_run(run.info.run_id)
        ended.append(trial_id)
    return ended


def log_end(client: Any, parent: str, runs: Mapping[str, Any], end: SweepEnd) -> None:
    """Writes what a sweep's end concluded: tags, metrics and documents, then the summary.

    Args:
        client: An ``MlflowClient``.
        parent: The sweep's parent run id.
        runs: The sweep's child runs, by trial id.
        end: The end to write (its checkpoints are not logged here).
    """
    best = end.best
    for trial_id, values in end.child_tags.items():
        run = runs.get(trial_id)
        for key, value in values.items() if run is not None else ():
            client.set_tag(run.info.run_id, key, value)
    for trial_id, series in end.child_metrics.items():
        run = runs.get(trial_id)
        if run is not None:
            _log_series(client, run.info.run_id, series)
    _log_series(client, parent, end.parent_metrics)
    for artifact_file, document in end.parent_documents.items():
        client.log_dict(parent, document, artifact_file)
    for key, value in end.parent_tags.items():
        client.set_tag(parent, key, value[:5000])
    if best is not None:
        client.set_tag(parent, tags.BEST_TRIAL, best.trial_id)
    client.log_text(parent, end.summary, "summary.txt")


def _chosen(where: Where, rows: Sequence[Any], end: SweepEnd) -> list[Any]:
    """The rows whose checkpoints are logged: ``mlflow.log_checkpoints``, and the registered."""
    best = end.best
    chosen = {"all": list(rows), "best": [best] if best else [], "none": []}[where.log_checkpoints]
    registered = []
    if where.register:
        aliased = _aliased(end)
        registered = [r for r in rows if r.trial_id in aliased]
    for row in registered:
        if row not in chosen:
            chosen = [*chosen, row]  # a registered model needs its checkpoint logged
    return chosen


def _log_models(
    tracker: SweepTracker, rows: Sequence[Any], runs: Mapping[str, Any], end: SweepEnd
) -> None:
    """Logs the chosen checkpoints; a completed trial's also as a logged model.

    The recommended trial's model is registered as ``mlflow.register`` (its version gets
    the ``recommended`` alias), and so are the ``fastest`` and ``most-accurate`` trials'
    (:attr:`SweepEnd.aliases`); a trial holding several aliases is one version. An alias
    the end names no trial for is dropped; one whose trial has no logged model (its
    checkpoint could not be fetched) stays where it was.
    """
    client, context, name = tracker.client, tracker.context, tracker.where.register
    aliased = _aliased(end) if name else {}
    for row in _chosen(tracker.where, rows, end):
        run = runs.get(row.trial_id)
        local = _fetched(row.checkpoint) if run is not None and row.checkpoint else None
        if run is None or local is None:
            continue
        _log_checkpoint_once(client, run.info.run_id, local)
        if row.status != TrialStatus.COMPLETED:
            continue
        model_id = log_trial_model(client, context.experiment_id, run, local)
        if row.trial_id in aliased:
            held = aliased[row.trial_id]
            version_tags = (
                end.recommended_tags
                if row.trial_id == end.recommended
                else end.version_tags.get(row.trial_id, {})
            )
            register_model(client, name, model_id, run.info.run_id, version_tags, aliases=held)
    if name and aliased:
        named = {alias for held in aliased.values() for alias in held}
        drop_aliases(client, name, [alias for alias in ALIASES if alias not in named])


def close_runs(
    tracker: SweepTracker, rows: Sequence[Any], records: Sequence[Any], end: SweepEnd
) -> Backfilled:
    """:func:`close_sweep`'s work, store errors raised; returns what it added.

    Rows still ``running`` (a sweep that goes on, or was killed) keep their runs open,
    and then the parent run too.
    """
    client = tracker.client
    done = backfill(tracker, records, close=False)
    # Tune's rows decide each trial's end (a stopped trial, an error's reason).
    for row in rows:
        if row.status == TrialStatus.RUNNING:
            continue
        child = tracker.child(row.trial_id, row.trial_id, row.axes)
        if not child.ended:
            child.finish(row.status, row.reason)
            done.runs_ended.append(row.trial_id)
    found = child_runs(client, tracker.context)
    lost = set(end_unrecorded(client, found, {row.trial_id for row in rows}))
    runs = {tag: r for r in found if (tag := r.data.tags.get(tags.TRIAL_ID)) not in lost}
    _log_models(tracker, rows, runs, end)
    parent = tracker.context.parent_run_id
    log_end(client, parent, runs, end)
    if all(row.status != TrialStatus.RUNNING for row in rows):
        client.set_terminated(parent, MLFLOW_FINISHED)
        done.parent_ended = True
    return done
