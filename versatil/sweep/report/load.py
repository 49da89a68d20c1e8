"""A sweep read back from MLflow: its trials' rows and its INT8 runs, judged.

Everything is read from the MLflow runs (not from Ray's files), so a report works from
any machine that reaches the tracking server.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from versatil.errors import ConfigError
from versatil.status import MLFLOW_FINISHED
from versatil.sweep.results.hardware import CEILINGS_ARTIFACT
from versatil.sweep.results.judgement import Judgement, judge
from versatil.sweep.results.rows import SETTINGS_COLUMNS, TrialRow, make_row
from versatil.sweep.tracking import TrackingContext, child_runs
from versatil.sweep.tracking.store import client as mlflow_client
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import COMPUTE_ARTIFACT, CONFIRM_ARTIFACT, RACE_ARTIFACT
from versatil.sweep.vocab.run_tags import Int8Tags, SweepTags, TrialTags

__all__ = ["Int8Row", "SweepReport", "int8_rows", "load_report", "read_confirmation"]

_NOT_AXES = {"task", "model_dtype", "autocast", "should_convert_model"}


@dataclasses.dataclass(frozen=True)
class Int8Row:
    """One INT8 run as the report shows it.

    Attributes:
        trial_id: The trial it compresses.
        run_id: The INT8 run.
        parent_run_id: The trial's run (the INT8 run's ``mlflow.parentRunId``).
        backend: ``torchao`` or ``torch.ao``.
        source: Where the trained checkpoint came from.
        metrics: The run's metrics (see :func:`int8_metrics`).
    """

    trial_id: str
    run_id: str
    parent_run_id: str
    backend: str
    source: str
    metrics: Mapping[str, float]


def int8_rows(client: Any, context: TrackingContext) -> list[Int8Row]:
    """The sweep's INT8 runs, the latest per trial, in trial order."""
    runs = client.search_runs(
        [context.experiment_id],
        filter_string=f"tags.`{tags.INT8_SWEEP_RUN}` = '{context.parent_run_id}'",
        order_by=["attributes.start_time DESC"],
        max_results=10_000,
    )
    latest: dict[str, Int8Row] = {}
    for run in runs:
        if run.info.status != MLFLOW_FINISHED:
            continue
        held = Int8Tags.read(run.data.tags)
        latest.setdefault(
            held.trial_id,
            Int8Row(
                trial_id=held.trial_id,
                run_id=run.info.run_id,
                parent_run_id=held.parent_run_id,
                backend=held.backend,
                source=held.source,
                metrics=dict(run.data.metrics),
            ),
        )
    return [latest[t] for t in sorted(latest)]


class SweepReport:
    """The trials of one sweep invocation (a parent run), as read from MLflow.

    Args:
        context: The sweep's parent run.
        mode: The primary objective's mode.
        rows: The trials.
        objectives: ``(metric, mode)`` of every objective; default the primary alone.
        tolerance: The verdict's tolerance (see :mod:`versatil.sweep.results.verdict`).
        confirmation: The re-timing's rounds, when the sweep's end re-timed its candidates
            (:mod:`versatil.sweep.results.confirmation`); they decide the verdict.
        target: The objective the trials' ``time_to_target_s`` was measured to, if any.
        judgement: The rows' judgement, when the caller judged them already (the sweep's
            end); default: judged here.
        reference: The sweep's reference setting, as its end recorded it
            (``versatil.reference``); ``None`` for eager fp32, or the slowest setting.
    """

    def __init__(
        self,
        context: TrackingContext,
        mode: str,
        rows: list[TrialRow],
        objectives: list[tuple[str, str]] | None = None,
        tolerance: float = 0.01,
        confirmation: Mapping[str, Any] | None = None,
        target: float | None = None,
        judgement: Judgement | None = None,
        reference: tuple[str, str, str] | None = None,
    ) -> None:
        self.context = context
        self.mode = mode
        self.rows = rows
        self.objectives = objectives or [(context.objective, mode)]
        self.confirmation = confirmation
        if judgement is None:
            judgement = judge(rows, self.objectives, tolerance, confirmation, target, reference)
        self.judgement = judgement
        self.marks = self.judgement.marks
        self.int8: list[Int8Row] = []  # the INT8 runs of `compress`, one per trial
        self.ceilings: list[dict[str, Any]] = []  # the devices' measured matmul ceilings
        self.race: dict[str, Any] | None = None  # a race's screen (results.race.race_summary)
        self.compute: dict[str, Any] | None = None  # device-seconds by phase


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def load_report(
    tracking_uri: str,
    experiment: str,
    parent_run_id: str | None = None,
    judgement: Judgement | None = None,
) -> SweepReport:
    """Reads the latest (or the given) sweep run of ``experiment`` and its trials.

    Args:
        tracking_uri: The tracking store.
        experiment: The sweep's MLflow experiment.
        parent_run_id: The sweep run; default the latest of the experiment.
        judgement: The judgement of the same rows, when the caller holds it (the sweep's
            own end): the report uses it instead of judging the rows again.

    Raises:
        ConfigError: when the experiment or its sweep runs do not exist, or the sweep
            run's tags hold values no sweep writes.
    """
    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise ConfigError(
            f"report: no MLflow experiment {experiment!r} at {tracking_uri}; "
            f"choose from {', '.join(sorted(names)) or 'none (run a sweep first)'}"
        )
    parent = _parent_run(client, found.experiment_id, experiment, parent_run_id)
    held = SweepTags.read(parent.data.tags)
    context = TrackingContext(
        tracking_uri=tracking_uri,
        experiment_id=found.experiment_id,
        parent_run_id=parent.info.run_id,
        objective=held.objective,
    )
    rows = sorted(
        (_trial_row(client, run, held.objective) for run in child_runs(client, context)),
        key=lambda r: r.trial_id,
    )
    confirmation = read_confirmation(client, parent.info.run_id)
    report = SweepReport(
        context,
        held.mode,
        rows,
        [(m, d.value) for m, d in held.objectives],
        held.tolerance,
        confirmation,
        held.target,
        judgement,
        held.reference,
    )
    report.int8 = int8_rows(client, context)
    ceilings = read_document(client, parent.info.run_id, CEILINGS_ARTIFACT)
    report.ceilings = list((ceilings or {}).get("ceilings", []))
    report.race = read_document(client, parent.info.run_id, RACE_ARTIFACT)
    report.compute = read_document(client, parent.info.run_id, COMPUTE_ARTIFACT)
    return report


def _parent_run(client: Any, experiment_id: str, name: str, run_id: str | None) -> Any:
    """The sweep run ``run_id``, or the latest sweep run of the experiment."""
    if run_id is not None:
        return client.get_run(run_id)
    parents = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{tags.OBJECTIVE}` != ''",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not parents:
        raise ConfigError(f"report: experiment {name!r} holds no sweep run")
    return parents[0]


def _trial_row(client: Any, run: Any, objective: str) -> TrialRow:
    """A trial's row from its child run: params, metrics and tags."""
    held = TrialTags.read(run.data.tags, run.info.run_id)
    metrics = dict(run.data.metrics)
    value = metrics.get(objective)
    history = client.get_metric_history(run.info.run_id, objective) if value is not None else []
    axes = {
        k: v if k in SETTINGS_COLUMNS else _number(v)
        for k, v in run.data.params.items()
        if (k in held.axes if held.axes is not None else k not in _NOT_AXES)
    }
    # Params hold the values the run opened with; a PBT exploit may have mutated them.
    axes.update((k, v) for k, v in held.trained_axes.items() if k in axes and v is not None)
    return make_row(
        trial_id=held.trial_id,
        config=axes,
        metrics=metrics,
        # Every step the objective was logged at: a retried epoch is one step.
        epochs=[m.step for m in history],
        axes=list(axes),
        objective=objective,
        status=held.status,
        reason=held.reason,
    )


def read_confirmation(client: Any, parent_run_id: str) -> dict[str, Any] | None:
    """The parent run's re-timing rounds (``confirm/rounds.json``), or ``None``."""
    return read_document(client, parent_run_id, CONFIRM_ARTIFACT)


def read_document(client: Any, run_id: str, artifact: str) -> dict[str, Any] | None:
    """A JSON document the run holds as ``artifact``, or ``None`` when it holds none."""
    folder = artifact.rpartition("/")[0]
    if artifact not in {a.path for a in client.list_artifacts(run_id, folder or None)}:
        return None
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory:
        path = client.download_artifacts(run_id, artifact, directory)
        return json.loads(Path(path).read_text())
