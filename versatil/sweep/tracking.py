"""MLflow: one parent run per sweep invocation, one child run per trial.

The driver opens the experiment and the parent run (a ``--resume`` reopens the same
parent); each trial opens its child run from its worker, tagged ``mlflow.parentRunId``
and ``versatil.trial_id``. A retried or restored trial finds its run by that tag and
continues it, so a trial never has two runs. The driver sets every child's final
``versatil.status`` when Tune ends the trial, whatever ended it (completion, a scheduler,
a crash), and logs checkpoints as artifacts under their ``CheckpointFilename`` names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError

__all__ = [
    "TRIAL_ID_TAG",
    "TrackingContext",
    "TrialTracker",
    "default_tracking_uri",
    "open_sweep_run",
]

TRIAL_ID_TAG = "versatil.trial_id"
STATUS_TAG = "versatil.status"
REASON_TAG = "versatil.reason"
PARENT_TAG = "mlflow.parentRunId"
PARENT_FILE = "mlflow_parent_run.json"

# Per-epoch metrics logged with the epoch as step, besides the objective.
EPOCH_METRICS = (
    "train_loss",
    "samples_per_sec",
    "epoch_time_s",
    "peak_memory_mb",
    "compile_time_s",
    "fit_time_s",
)
RUN_STATUS = {"completed": "FINISHED", "stopped": "KILLED", "infeasible": "FINISHED"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackingContext:
    """What a trial needs to log to its sweep's parent run (pickled to the workers)."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    objective: str


def default_tracking_uri(storage_dir: Path) -> str:
    """The embedded store: a SQLite file under the sweep's storage path; no server."""
    return f"sqlite:///{storage_dir / 'mlflow.db'}"


def check_server(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fails with one clear message when an http(s) tracking URI has no server behind it."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=timeout_s):
            pass
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ConfigError(
            f"--tracking-uri: no MLflow server answers at {tracking_uri!r} ({reason}); start "
            "one (mlflow server --host 127.0.0.1 --port 5000) or omit --tracking-uri to use the "
            "embedded SQLite store"
        ) from None


def _client(tracking_uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def open_sweep_run(
    *,
    tracking_uri: str,
    experiment: str,
    experiment_dir: Path,
    storage_dir: Path,
    sweep_yaml: str,
    objective: str,
    mode: str,
) -> TrackingContext:
    """Opens (or, when ``experiment_dir`` records one, reopens) the sweep's parent run."""
    client = _client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        artifacts = None
        if not tracking_uri.startswith(("http://", "https://")):
            artifacts = (storage_dir / "mlartifacts").as_uri()
        experiment_id = client.create_experiment(experiment, artifact_location=artifacts)
    else:
        experiment_id = found.experiment_id
    record = experiment_dir / PARENT_FILE
    if record.is_file():
        parent_run_id = json.loads(record.read_text())["run_id"]
        client.update_run(parent_run_id, status="RUNNING")
    else:
        run = client.create_run(
            experiment_id,
            run_name=experiment_dir.name,
            tags={
                "versatil.sweep": experiment,
                "versatil.experiment_dir": str(experiment_dir),
                "versatil.objective": objective,
                "versatil.mode": mode,
            },
        )
        parent_run_id = run.info.run_id
        client.log_text(parent_run_id, sweep_yaml, "sweep.yaml")
        experiment_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run_id": parent_run_id, "tracking_uri": tracking_uri}))
    return TrackingContext(
        tracking_uri=tracking_uri,
        experiment_id=experiment_id,
        parent_run_id=parent_run_id,
        objective=objective,
    )


def find_child_run(client: Any, context: TrackingContext, trial_id: str) -> Any | None:
    """The child run of ``trial_id`` under the parent run, if it exists."""
    runs = client.search_runs(
        [context.experiment_id],
        filter_string=(
            f"tags.`{TRIAL_ID_TAG}` = '{trial_id}' "
            f"and tags.`{PARENT_TAG}` = '{context.parent_run_id}'"
        ),
        max_results=2,
    )
    return runs[0] if runs else None


def child_runs(client: Any, context: TrackingContext) -> list[Any]:
    """Every child run of the parent run."""
    return client.search_runs(
        [context.experiment_id],
        filter_string=f"tags.`{PARENT_TAG}` = '{context.parent_run_id}'",
        max_results=10_000,
    )


def _derived_params(config: Any) -> dict[str, str]:
    precision = config.precision
    try:
        dtype = str(precision.get_model_dtype()).removeprefix("torch.")
    except NotImplementedError:
        dtype = "none"
    return {
        "model_dtype": dtype,
        "autocast": str(precision.is_mixed()).lower(),
        "should_convert_model": str(precision.should_convert_model()).lower(),
    }


class TrialTracker:
    """A trial's child run, opened (or continued) from the trial's worker."""

    def __init__(
        self,
        context: TrackingContext,
        *,
        trial_id: str,
        trial_name: str,
        axes: Mapping[str, Any],
        config: Any,
    ) -> None:
        from mlflow.entities import Param

        self.client = _client(context.tracking_uri)
        existing = find_child_run(self.client, context, trial_id)
        if existing is not None:  # a retry, a resume or a PBT exploit: same run
            self.run_id = existing.info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
            return
        run = self.client.create_run(
            context.experiment_id,
            run_name=trial_name,
            tags={
                PARENT_TAG: context.parent_run_id,
                TRIAL_ID_TAG: trial_id,
                "versatil.trial_name": trial_name,
                STATUS_TAG: "running",
            },
        )
        self.run_id = run.info.run_id
        params = {
            **{name: "none" if value is None else str(value) for name, value in axes.items()},
            **{
                k: str(v) if v is not None else "none"
                for k, v in config.settings.to_config().items()
            },
            **_derived_params(config),
            "task": config.task,
        }
        self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()])
        import yaml

        self.client.log_text(
            self.run_id, yaml.safe_dump(config.to_yaml_dict(), sort_keys=False), "config.yaml"
        )

    def log_epoch(self, metrics: Mapping[str, Any], objective: str) -> None:
        """Logs one epoch's metrics with the epoch as step, in one request."""
        from mlflow.entities import Metric

        step = int(metrics.get("epoch", 0))
        now = int(time.time() * 1000)
        batch = [
            Metric(name, float(metrics[name]), now, step)
            for name in (objective, *EPOCH_METRICS)
            if name in metrics and not math.isinf(float(metrics[name]))
        ]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)


def finish_child_run(
    client: Any, context: TrackingContext, trial_id: str, status: str, reason: str
) -> str | None:
    """Sets a trial's final status tags and ends its run; returns the run id."""
    run = find_child_run(client, context, trial_id)
    if run is None:
        return None
    run_id = run.info.run_id
    client.set_tag(run_id, STATUS_TAG, status)
    if reason:
        client.set_tag(run_id, REASON_TAG, reason[:5000])
    client.set_terminated(run_id, RUN_STATUS.get(status, "FAILED"))
    return run_id


def log_checkpoint(client: Any, run_id: str, checkpoint_dir: str) -> None:
    """Logs a checkpoint directory under ``checkpoint/`` with its CheckpointFilename names."""
    client.log_artifacts(run_id, checkpoint_dir, artifact_path="checkpoint")


class SweepTracker:
    """The driver's side: final statuses of child runs, checkpoints, the parent's summary."""

    def __init__(
        self, context: TrackingContext, log_checkpoints: str, register_best: str | None = None
    ) -> None:
        self.context = context
        self.log_checkpoints = log_checkpoints
        self.register_best = register_best
        self.client = _client(context.tracking_uri)

    def callback(self) -> Any:
        """A Tune callback that closes each child run when Tune ends its trial."""
        from ray import tune

        tracker = self

        class _Callback(tune.Callback):
            def on_trial_complete(self, iteration, trials, trial, **info):
                result = trial.last_result or {}
                status = result.get("status", "failed")
                tracker.finish_trial(
                    trial.trial_id, "stopped" if status == "running" else status, result
                )

            def on_trial_error(self, iteration, trials, trial, **info):
                error = ""
                if trial.error_file and Path(trial.error_file).is_file():
                    lines = Path(trial.error_file).read_text().strip().splitlines()
                    error = lines[-1] if lines else ""
                tracker.finish_trial(trial.trial_id, "failed", {"reason": error})

        return _Callback()

    def finish_trial(self, trial_id: str, status: str, result: Mapping[str, Any]) -> None:
        """Tags a child run with its final status and reason and ends it."""
        finish_child_run(self.client, self.context, trial_id, status, str(result.get("reason", "")))

    def _register(self, run: Any) -> None:
        """A new version of the registered model, pointing at the best checkpoint."""
        from mlflow.exceptions import MlflowException

        with contextlib.suppress(MlflowException):  # it exists: add a version
            self.client.create_registered_model(self.register_best)
        self.client.create_model_version(
            self.register_best,
            source=f"{run.info.artifact_uri}/checkpoint",
            run_id=run.info.run_id,
            tags={TRIAL_ID_TAG: run.data.tags[TRIAL_ID_TAG]},
        )

    def finish_sweep(self, rows: list[Any], best: Any | None, summary: str) -> None:
        """Logs checkpoints per ``mlflow.log_checkpoints`` and the summary, ends the parent."""
        chosen = {"all": rows, "best": [best] if best else [], "none": []}[self.log_checkpoints]
        if self.register_best and best is not None and best not in chosen:
            chosen = [*chosen, best]  # a registered model needs its checkpoint logged
        for row in chosen:
            run = find_child_run(self.client, self.context, row.trial_id)
            if run is not None and row.checkpoint and Path(row.checkpoint).is_dir():
                log_checkpoint(self.client, run.info.run_id, row.checkpoint)
                if self.register_best and row is best:
                    self._register(run)
        parent = self.context.parent_run_id
        if best is not None:
            self.client.set_tag(parent, "versatil.best_trial_id", best.trial_id)
        self.client.log_text(parent, summary, "summary.txt")
        self.client.set_terminated(parent, "FINISHED")
