"""A trial's child run: its params, its epochs (each step logged once) and its end."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from versatil.status import MLFLOW_RUNNING, TrialStatus
from versatil.sweep.tracking.store import TrackingContext, find_child_run
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.keys import EPOCH, HPARAMS, flatten, metric_items
from versatil.sweep.vocab.names import CHECKPOINT_ARTIFACT, configuration_name, run_name
from versatil.sweep.vocab.report import TrialReport

__all__ = ["ChildRun", "log_checkpoint", "mlflow_key", "trial_params"]

# MLflow's limits on one request and on a param (mlflow.utils.validation).
MAX_PARAMS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
"""Metrics, params and tags together; metrics alone have the same limit."""
MAX_PARAM_VALUE = 6000
MAX_KEY = 250


def _derived_params(config: Any) -> dict[str, str]:
    precision = config.precision
    try:
        dtype = precision.model_dtype_name()
    except NotImplementedError:
        dtype = "none"
    return {
        "model_dtype": dtype,
        "autocast": str(precision.is_mixed()).lower(),
        "should_convert_model": str(precision.should_convert_model()).lower(),
    }


def trial_params(axes: Mapping[str, Any], config: Any | None) -> dict[str, str]:
    """A trial's MLflow params: axes, settings, task, task params and Trainer options.

    Task params (fixed and swept) are flattened with dots (``optim.lr``); the settings
    are logged by enum value, and ``model_dtype``, ``autocast``, ``should_convert_model``
    say what they mean for inference. The Trainer options are ``trainer.NAME``
    (``trainer.max_steps``), the epochs among them (``trainer.max_epochs``, ``none``
    under a step or time budget alone).
    """
    params = flatten(dict(axes))
    if config is not None:
        params.update(flatten(config.params))
        params.update(flatten(config.settings.to_config()))
        trainer = {"max_epochs": config.max_epochs, **config.trainer}
        params.update(flatten(trainer, "trainer."))
        params.update(_derived_params(config), task=config.task)
    return params


def mlflow_key(name: str) -> str:
    """``name`` with the characters MLflow rejects in a key replaced by ``_``, cut to length."""
    allowed = set("_-. /")
    return "".join(c if c.isalnum() or c in allowed else "_" for c in name)[:MAX_KEY]


def _fit_params(params: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Params within MLflow's limits: long values truncated (and named), long keys cut."""
    fitted: dict[str, str] = {}
    truncated = []
    for key, value in params.items():
        if len(value) > MAX_PARAM_VALUE:
            note = f"... [truncated from {len(value)} characters]"
            value = value[: MAX_PARAM_VALUE - len(note)] + note
            truncated.append(key)
        fitted[mlflow_key(key)] = value
    return fitted, truncated


class ChildRun:
    """A trial's child run under the sweep's parent run.

    Params wait in :attr:`pending` and go out in the same ``log_batch`` as the run's next
    metrics (one request, one transaction, where separate calls cost each their own), or
    at its end.

    Attributes:
        run_id: The MLflow run id.
        params: The params the run holds (MLflow params cannot change once logged).
        pending: Params to log with the run's next batch.
        steps: The steps each metric holds: MLflow keeps every value logged, so a step
            already there (an epoch Tune reports again after a restore, or one a backfill
            finds missing) is never logged twice.
        ended: Whether the run holds its trial's final status.
        in_doubt: Whether a batch failed in a way that leaves its outcome unknown (the
            connection failed after the request went out, and the server may have written
            it): before the run's next metrics, :attr:`steps` is read again from the server.
    """

    def __init__(self, client: Any, run_id: str, params: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.params: dict[str, str] = dict(params or {})
        self.pending: dict[str, str] = {}
        self._truncated: list[str] = []
        self._notes: dict[str, str] = {}  # note tags to send with the next batch
        self._noted: dict[str, str] = {}  # note tags the run holds
        self.steps: dict[str, set[int]] = {}
        self.ended = False
        self.in_doubt = False

    def load_steps(self, metrics: Iterable[str]) -> None:
        """Reads which steps the run already holds for each of ``metrics``."""
        for name in metrics:
            history = self.client.get_metric_history(self.run_id, name)
            self.steps[name] = {m.step for m in history}

    def holds(self, step: int) -> bool:
        """Whether every metric the run has holds ``step`` (an epoch fully logged)."""
        return bool(self.steps) and all(step in held for held in self.steps.values())

    @classmethod
    def open(
        cls,
        client: Any,
        context: TrackingContext,
        *,
        trial_id: str,
        trial_name: str,
        axes: Mapping[str, Any],
        config: Any | None,
    ) -> ChildRun:
        """Continues the trial's run if one exists, else creates it; its params go pending.

        Args:
            client: An ``MlflowClient`` for ``context.tracking_uri``.
            context: The sweep's parent run.
            trial_id: Tune's trial id, the ``versatil.trial_id`` tag.
            trial_name: Tune's trial name, the ``versatil.trial_name`` tag.
            axes: The trial's values of the sweep's axes.
            config: The trial's resolved ``TrainConfig``, or ``None`` when its axes do not
                make one (the run then holds the axes alone).
        """
        existing = find_child_run(client, context, trial_id)
        if existing is not None:  # a retry, a resume, a backfill or a PBT exploit: same run
            child = cls(client, existing.info.run_id, existing.data.params)
            child.load_steps(existing.data.metrics)
            child.ended = existing.info.status != MLFLOW_RUNNING
            child.add_params(trial_params(axes, config))  # any its first driver missed
            return child
        run = client.create_run(
            context.experiment_id,
            run_name=run_name(axes, trial_name),
            tags={
                tags.PARENT: context.parent_run_id,
                tags.TRIAL_ID: trial_id,
                tags.TRIAL_NAME: trial_name,
                tags.AXES: ",".join(axes),
                tags.CONFIGURATION: configuration_name(axes),
                tags.STATUS: TrialStatus.RUNNING,
            },
        )
        child = cls(client, run.info.run_id)
        child.add_params(trial_params(axes, config))
        if config is not None:
            import yaml

            client.log_text(
                child.run_id, yaml.safe_dump(config.to_yaml_dict(), sort_keys=False), "config.yaml"
            )
        return child

    def reopen(self) -> None:
        """Marks an ended run RUNNING again: its trial goes on (a retry, a resume)."""
        if self.ended:
            self.client.update_run(self.run_id, status=MLFLOW_RUNNING)
            self.ended = False

    def add_params(self, params: Mapping[str, str]) -> None:
        """Adds the params the run does not hold yet to :attr:`pending`.

        A name the run already holds with another value (a module hyperparameter named
        like a task param) becomes ``hparams.NAME`` instead: params cannot change.
        """
        fitted, truncated = _fit_params(params)
        for key, value in fitted.items():
            held = self.params.get(key, self.pending.get(key))
            if held is not None and held != value:
                key = mlflow_key(f"{HPARAMS}.{key}")
                held = self.params.get(key, self.pending.get(key))
            if held is None:
                self.pending[key] = value
        self._truncated += truncated

    def log_params(self, params: Mapping[str, str]) -> None:
        """Logs the params the run does not hold yet (see :meth:`add_params`) now."""
        self.add_params(params)
        self._send([])

    def log_epoch(self, result: Mapping[str, Any]) -> int:
        """Logs every metric of one epoch's result with the epoch as step; returns how many.

        Every numeric key that is not bookkeeping is a metric: what the module logged
        (``self.log``), versatil's throughput and memory, and the optimizer's values.
        The module's hyperparameters, in a fit's first result, become params, sent with
        the metrics. A (metric, step) the run already holds is skipped.
        """
        from mlflow.entities import Metric

        report = TrialReport.from_dict(result)
        if report.hparams:
            self.add_params(report.hparams)
        for key, why in (report.hardware_notes or {}).items():
            tag = f"{tags.NOTE_PREFIX}{key}"
            if self._noted.get(tag) != str(why):
                self._notes[tag] = str(why)[:5000]
        step = int(result.get(EPOCH, 0))
        if self.in_doubt:  # what the failed batch wrote is in the history: never twice
            self.load_steps({*self.steps, *(mlflow_key(k) for k, _ in metric_items(result))})
            self.in_doubt = False
        now = int(time.time() * 1000)
        batch = [
            Metric(name, v, now, step)
            for name, v in ((mlflow_key(k), v) for k, v in metric_items(result))
            if step not in self.steps.get(name, ())
        ]
        self._send(batch)
        return len(batch)

    def _send(self, metrics: list[Any]) -> None:
        """Logs ``metrics`` and the pending params in as few batches as MLflow accepts."""
        from mlflow.entities import Param, RunTag

        while metrics or self.pending or self._truncated or self._notes:
            params = list(self.pending.items())[:MAX_PARAMS_PER_BATCH]
            notes = [RunTag(key, value) for key, value in self._notes.items()]
            if self._truncated:
                note = ", ".join(sorted(set(self._truncated)))[:5000]
                notes.append(RunTag(tags.TRUNCATED_PARAMS, note))
            chunk = metrics[: MAX_ENTITIES_PER_BATCH - len(params) - len(notes)]
            try:
                self.client.log_batch(
                    self.run_id,
                    metrics=chunk,
                    params=[Param(k, v) for k, v in params],
                    tags=notes,
                )
            except Exception:
                self.in_doubt = self.in_doubt or bool(chunk)  # the next log asks the server
                raise
            for key, _ in params:
                self.params[key] = self.pending.pop(key)
            for metric in chunk:
                self.steps.setdefault(metric.key, set()).add(metric.step)
            metrics = metrics[len(chunk) :]
            self._noted.update(self._notes)
            self._notes = {}
            self._truncated = []

    def finish(self, status: str, reason: str) -> None:
        """Logs what params are pending, sets the final status (and reason) tags, ends the run."""
        self._send([])
        self.client.set_tag(self.run_id, tags.STATUS, status)
        if reason:
            self.client.set_tag(self.run_id, tags.REASON, reason[:5000])
        self.client.set_terminated(self.run_id, TrialStatus(status).mlflow_status)
        self.ended = True


def log_checkpoint(client: Any, run_id: str, checkpoint_dir: str) -> None:
    """Logs a checkpoint directory under ``checkpoint/`` with its CheckpointFilename names."""
    client.log_artifacts(run_id, checkpoint_dir, artifact_path=CHECKPOINT_ARTIFACT)
