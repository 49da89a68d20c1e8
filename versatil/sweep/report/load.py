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
from versatil.status import TrialStatus
from versatil.sweep.results.hardware import CEILINGS_ARTIFACT
from versatil.sweep.results.judgement import judge
from versatil.sweep.results.rows import SETTINGS_COLUMNS, TrialRow, make_row
from versatil.sweep.tracking import TrackingContext, child_runs
from versatil.sweep.tracking.store import client as mlflow_client
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import CONFIRM_ARTIFACT

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
        if run.info.status != "FINISHED":
            continue
        held = run.data.tags
        trial_id = held.get(tags.INT8_TRIAL, "")
        latest.setdefault(
            trial_id,
            Int8Row(
                trial_id=trial_id,
                run_id=run.info.run_id,
                parent_run_id=held.get(tags.PARENT, ""),
                backend=held.get(tags.INT8_BACKEND, ""),
                source=held.get(tags.INT8_SOURCE, ""),
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
    ) -> None:
        self.context = context
        self.mode = mode
        self.rows = rows
        self.objectives = objectives or [(context.objective, mode)]
        self.confirmation = confirmation
        self.judgement = judge(rows, self.objectives, tolerance, confirmation, target)
        self.marks = self.judgement.marks
        self.int8: list[Int8Row] = []  # the INT8 runs of `compress`, one per trial
        self.ceilings: list[dict[str, Any]] = []  # the devices' measured matmul ceilings


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def load_report(
    tracking_uri: str, experiment: str, parent_run_id: str | None = None
) -> SweepReport:
    """Reads the latest (or the given) sweep run of ``experiment`` and its trials.

    Raises:
        ConfigError: when the experiment or its sweep runs do not exist.
    """
    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise ConfigError(
            f"report: no MLflow experiment {experiment!r} at {tracking_uri}; "
            f"choose from {', '.join(sorted(names)) or 'none (run a sweep first)'}"
        )
    if parent_run_id is None:
        parents = client.search_runs(
            [found.experiment_id],
            filter_string=f"tags.`{tags.OBJECTIVE}` != ''",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not parents:
            raise ConfigError(f"report: experiment {experiment!r} holds no sweep run")
        parent = parents[0]
    else:
        parent = client.get_run(parent_run_id)
    objective = parent.data.tags[tags.OBJECTIVE]
    context = TrackingContext(
        tracking_uri=tracking_uri,
        experiment_id=found.experiment_id,
        parent_run_id=parent.info.run_id,
        objective=objective,
    )
    rows = []
    for run in child_runs(client, context):
        metrics = dict(run.data.metrics)
        value = metrics.get(objective)
        history = client.get_metric_history(run.info.run_id, objective) if value is not None else []
        params = run.data.params
        names = run.data.tags.get(tags.AXES)
        axes = {
            k: v if k in SETTINGS_COLUMNS else _number(v)
            for k, v in params.items()
            if (k in names.split(",") if names is not None else k not in _NOT_AXES)
        }
        # Params hold the values the run opened with; a PBT exploit may have mutated them.
        trained = json.loads(run.data.tags.get(tags.TRAINED_AXES, "{}"))
        axes.update((k, v) for k, v in trained.items() if k in axes and v is not None)
        rows.append(
            make_row(
                trial_id=run.data.tags.get(tags.TRIAL_ID, run.info.run_id),
                config=axes,
                metrics=metrics,
                # Every step the objective was logged at: a retried epoch is one step.
                epochs=[m.step for m in history],
                axes=list(axes),
                objective=objective,
                status=TrialStatus(run.data.tags.get(tags.STATUS, TrialStatus.RUNNING)),
                reason=run.data.tags.get(tags.REASON, ""),
            )
        )
    rows.sort(key=lambda r: r.trial_id)
    held = parent.data.tags
    mode = held.get(tags.MODE, "min")
    objectives = [tuple(o) for o in json.loads(held.get(tags.OBJECTIVES, "[]"))]
    tolerance = float(held.get(tags.TOLERANCE, 0.01))
    confirmation = read_confirmation(client, parent.info.run_id)
    target = float(held[tags.TARGET]) if tags.TARGET in held else None
    report = SweepReport(context, mode, rows, objectives or None, tolerance, confirmation, target)
    report.int8 = int8_rows(client, context)
    ceilings = read_document(client, parent.info.run_id, CEILINGS_ARTIFACT)
    report.ceilings = list((ceilings or {}).get("ceilings", []))
    return report


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
