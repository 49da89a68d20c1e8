"""MLflow: one parent run per sweep invocation, one child run per trial.

All logging happens in the driver, from a Tune callback: workers never import MLflow or
talk to the tracking server, so a worker's warm-up is torch and Lightning alone and an
epoch's report costs the training nothing. The parent run is opened while Ray, Tune and
the first workers start (a ``--resume`` reopens the same parent). A trial's child run,
tagged ``mlflow.parentRunId`` and ``versatil.trial_id``, is opened at its first result;
a retried or restored trial (a new driver after ``--resume`` included) finds its run by
that tag and continues it, so a trial never has two runs. When Tune ends a trial, whatever
ended it (completion, a scheduler, a crash), its run gets its final ``versatil.status``;
at the end of the sweep checkpoints are logged under their ``CheckpointFilename`` names.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.result_keys import EPOCH, HPARAMS, STATUS, flatten, metric_items

__all__ = [
    "TRIAL_ID_TAG",
    "ChildRun",
    "SweepTracker",
    "TrackingContext",
    "TrackingUnavailable",
    "default_tracking_uri",
    "open_sweep_run",
]

logger = logging.getLogger(__name__)

# MLflow 3's usage telemetry runs background threads in the driver that compete with the
# trials for CPU (measured with tracking in the training process: +8% fit wall with it,
# +1% without). Off unless the environment says otherwise; set before MLflow loads.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's HTTP client retries 7 times with exponential backoff and waits up to 120 s per
# request: a dead or hung server stalls a command for minutes. Bound every call: at most
# ~15 s per request, 2 retries, about 4 s of backoff in all.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


class TrackingUnavailable(ConfigError):
    """The sweep's parent run could not be opened; nothing can be logged."""


TRIAL_ID_TAG = "versatil.trial_id"
STATUS_TAG = "versatil.status"
REASON_TAG = "versatil.reason"
AXES_TAG = "versatil.axes"
"""The names of the sweep's axes, comma-separated: which params the report compares."""
OBJECTIVES_TAG = "versatil.objectives"
TOLERANCE_TAG = "versatil.tolerance"
PARENT_TAG = "mlflow.parentRunId"
PARENT_FILE = "mlflow_parent_run.json"

# MLflow's limits on one request and on a param (mlflow.utils.validation).
MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
MAX_PARAM_VALUE = 6000
MAX_KEY = 250


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackingContext:
    """Where a sweep's runs live: the store, the experiment and the parent run."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    objective: str


def default_tracking_uri(storage_dir: Path) -> str:
    """The embedded store: a SQLite file under the sweep's storage path; no server."""
    return f"sqlite:///{storage_dir / 'mlflow.db'}"


def check_server(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fails with one clear message when a tracking URI cannot work.

    That is a URI of a scheme MLflow cannot track to, or an http(s) URI with no server
    behind it: a server that accepts the connection but does not answer within
    ``timeout_s`` counts as none.
    """
    import http.client

    scheme = tracking_uri.partition("://")[0].partition("+")[0] if "://" in tracking_uri else ""
    if scheme not in ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks"):
        raise ConfigError(
            f"--tracking-uri: {tracking_uri!r} is not a tracking URI MLflow can use; give an "
            "MLflow server (http://host:port) or a database (sqlite:///path/to/mlflow.db)"
        )
    if scheme not in ("http", "https"):
        return
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=timeout_s):
            pass
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        if isinstance(reason, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
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
    objectives: list[tuple[str, str]] | None = None,
    tolerance: float = 0.01,
) -> TrackingContext:
    """Opens (or, when ``experiment_dir`` records one, reopens) the sweep's parent run.

    The parent is tagged with the primary ``objective`` and ``mode``, every objective
    (``versatil.objectives``, JSON ``[[metric, mode], ...]``) and the verdict's tolerance.
    """
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
                OBJECTIVES_TAG: json.dumps(objectives or [[objective, mode]]),
                TOLERANCE_TAG: repr(tolerance),
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
        dtype = precision.model_dtype_name()
    except NotImplementedError:
        dtype = "none"
    return {
        "model_dtype": dtype,
        "autocast": str(precision.is_mixed()).lower(),
        "should_convert_model": str(precision.should_convert_model()).lower(),
    }


def trial_params(axes: Mapping[str, Any], config: Any | None) -> dict[str, str]:
    """A trial's MLflow params: its axes, the settings, the task and every task param.

    Task params (fixed and swept) are flattened with dots (``optim.lr``); the settings
    are logged by enum value, and ``model_dtype``, ``autocast``, ``should_convert_model``
    say what they mean for inference.
    """
    params = flatten(dict(axes))
    if config is not None:
        params.update(flatten(config.params))
        params.update(flatten(config.settings.to_config()))
        params.update(_derived_params(config), task=config.task)
    return params


def run_name(axes: Mapping[str, Any], fallback: str) -> str:
    """What sets a trial apart, for the UI's run list: ``bf16-mixed/default/lr=0.003``.

    The settings axes come first by value (an eager trial's compile mode reads ``eager``),
    then every other axis as ``name=value``.
    """
    from versatil.sweep.config import ENUM_AXES, NONE

    parts = []
    for name in ENUM_AXES:
        if name in axes:
            value = axes[name]
            if value in (None, NONE):
                value = "eager" if name == "compile_mode" else f"{name}=none"
            parts.append(str(value))
    for name, value in axes.items():
        if name not in ENUM_AXES:
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            parts.append(f"{name}={text}")
    return "/".join(parts)[:MAX_KEY] or fallback


def _fit_params(params: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Params within MLflow's limits: long values truncated (and named), long keys cut."""
    fitted: dict[str, str] = {}
    truncated = []
    for key, value in params.items():
        if len(value) > MAX_PARAM_VALUE:
            note = f"... [truncated from {len(value)} characters]"
            value = value[: MAX_PARAM_VALUE - len(note)] + note
            truncated.append(key)
        fitted[_mlflow_key(key)] = value
    return fitted, truncated


class ChildRun:
    """A trial's child run under the sweep's parent run.

    Attributes:
        run_id: The MLflow run id.
        params: The params the run holds (MLflow params cannot change once logged).
        steps: The steps each metric holds: MLflow keeps every value logged, so a step
            already there (an epoch Tune reports again after a restore) is never logged twice.
    """

    def __init__(self, client: Any, run_id: str, params: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.params: dict[str, str] = dict(params or {})
        self.steps: dict[str, set[int]] = {}

    def load_steps(self, metrics: Iterable[str]) -> None:
        """Reads which steps the run already holds for each of ``metrics``."""
        for name in metrics:
            history = self.client.get_metric_history(self.run_id, name)
            self.steps[name] = {m.step for m in history}

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
        """Continues the trial's run if one exists, else creates it with its params.

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
        if existing is not None:  # a retry, a resume or a PBT exploit: same run
            if existing.info.status != "RUNNING":
                client.update_run(existing.info.run_id, status="RUNNING")
            child = cls(client, existing.info.run_id, existing.data.params)
            child.load_steps(existing.data.metrics)
            return child
        run = client.create_run(
            context.experiment_id,
            run_name=run_name(axes, trial_name),
            tags={
                PARENT_TAG: context.parent_run_id,
                TRIAL_ID_TAG: trial_id,
                "versatil.trial_name": trial_name,
                AXES_TAG: ",".join(axes),
                STATUS_TAG: TrialStatus.RUNNING,
            },
        )
        child = cls(client, run.info.run_id)
        child.log_params(trial_params(axes, config))
        if config is not None:
            import yaml

            client.log_text(
                child.run_id, yaml.safe_dump(config.to_yaml_dict(), sort_keys=False), "config.yaml"
            )
        return child

    def log_params(self, params: Mapping[str, str]) -> None:
        """Logs the params the run does not hold yet, in batches MLflow accepts.

        A name the run already holds with another value (a module hyperparameter named
        like a task param) is logged as ``hparams.NAME`` instead: params cannot change.
        """
        from mlflow.entities import Param

        fitted, truncated = _fit_params(params)
        new = {}
        for key, value in fitted.items():
            held = self.params.get(key)
            if held is not None and held != value:
                key = _mlflow_key(f"{HPARAMS}.{key}")
                held = self.params.get(key)
            if held is None:
                new[key] = value
        items = [Param(k, v) for k, v in new.items()]
        for start in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[start : start + MAX_PARAMS_PER_BATCH])
        self.params.update(new)
        if truncated:
            self.client.set_tag(
                self.run_id, "versatil.truncated_params", ", ".join(truncated)[:5000]
            )

    def log_epoch(self, result: Mapping[str, Any]) -> None:
        """Logs every metric of one epoch's result with the epoch as step.

        Every numeric key that is not bookkeeping is a metric: what the module logged
        (``self.log``), versatil's throughput and memory, and the optimizer's values.
        The module's hyperparameters, in a fit's first result, become params.
        """
        from mlflow.entities import Metric

        if isinstance(result.get(HPARAMS), Mapping):
            self.log_params(result[HPARAMS])
        step = int(result.get(EPOCH, 0))
        now = int(time.time() * 1000)
        batch = [
            Metric(name, v, now, step)
            for name, v in ((_mlflow_key(k), v) for k, v in metric_items(result))
            if step not in self.steps.get(name, ())
        ]
        for start in range(0, len(batch), MAX_METRICS_PER_BATCH):
            chunk = batch[start : start + MAX_METRICS_PER_BATCH]
            self.client.log_batch(self.run_id, metrics=chunk)
            for metric in chunk:
                self.steps.setdefault(metric.key, set()).add(step)

    def finish(self, status: str, reason: str) -> None:
        """Sets the final status (and reason) tags and ends the run."""
        self.client.set_tag(self.run_id, STATUS_TAG, status)
        if reason:
            self.client.set_tag(self.run_id, REASON_TAG, reason[:5000])
        self.client.set_terminated(self.run_id, TrialStatus(status).mlflow_status)


def _mlflow_key(name: str) -> str:
    """``name`` with the characters MLflow rejects in a key replaced by ``_``, cut to length."""
    allowed = set("_-. /")
    return "".join(c if c.isalnum() or c in allowed else "_" for c in name)[:MAX_KEY]


def log_checkpoint(client: Any, run_id: str, checkpoint_dir: str) -> None:
    """Logs a checkpoint directory under ``checkpoint/`` with its CheckpointFilename names."""
    client.log_artifacts(run_id, checkpoint_dir, artifact_path="checkpoint")


class SweepTracker:
    """The driver's side of tracking: every child run, the checkpoints, the parent's summary.

    The Tune callback only queues its work: one background thread logs it in order, so a
    trial (which waits at each report until the driver has taken its result) never waits
    on the tracking store. :meth:`finish_sweep` drains the queue.

    Args:
        opening: The parent run, or the future of it being opened: trials start while
            it opens, and the first logging call waits for it.
        sweep: The sweep (objective, ``mlflow.log_checkpoints``, ``mlflow.register_best``,
            and what a trial's axes resolve to).
    """

    def __init__(self, opening: TrackingContext | concurrent.futures.Future, sweep: Any) -> None:
        self._opening = opening
        self.sweep = sweep
        self.log_checkpoints = sweep.mlflow.log_checkpoints
        self.register_best = sweep.mlflow.register_best
        self._client: Any = None
        self._children: dict[str, ChildRun] = {}
        self._failed: set[str] = set()
        self._queue: concurrent.futures.ThreadPoolExecutor | None = None
        self.log_times_s: list[float] = []
        """Seconds each queued logging call took in the background thread."""

    def __getstate__(self) -> dict[str, Any]:
        # The Tuner pickles its callbacks into the experiment state; a restored sweep
        # gets a new tracker (run_sweep), so the copy keeps only what pickles.
        context = self._opening if isinstance(self._opening, TrackingContext) else None
        return {
            **self.__dict__,
            "_opening": context,
            "_client": None,
            "_children": {},
            "_queue": None,
        }

    def submit(self, call: Callable[..., None], *args: Any) -> None:
        """Queues a logging call for the background thread, after the ones before it.

        Raises:
            TrackingUnavailable: when the parent run failed to open: the sweep stops.
        """
        if isinstance(self._opening, concurrent.futures.Future) and self._opening.done():
            _ = self.context  # raises if opening failed
        if self._queue is None:
            self._queue = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="mlflow-log"
            )
        self._queue.submit(self._timed, call, *args)

    def _timed(self, call: Callable[..., None], *args: Any) -> None:
        start = time.perf_counter()
        call(*args)
        self.log_times_s.append(time.perf_counter() - start)

    def drain(self) -> None:
        """Waits until every queued logging call is done."""
        if self._queue is not None:
            self._queue.shutdown(wait=True)
            self._queue = None

    @property
    def context(self) -> TrackingContext:
        """The parent run, once it is open.

        Raises:
            TrackingUnavailable: when the parent run could not be opened.
        """
        if isinstance(self._opening, concurrent.futures.Future):
            try:
                self._opening = self._opening.result()
            except ConfigError:
                raise
            except Exception as error:
                raise TrackingUnavailable(
                    f"MLflow: cannot open the sweep's parent run ({type(error).__name__}: "
                    f"{error}); the trials' results so far stay in the Tune experiment "
                    "directory: fix the store, then continue with --resume"
                ) from None
        return self._opening

    @property
    def client(self) -> Any:
        """The ``MlflowClient`` of the sweep's store."""
        if self._client is None:
            self._client = _client(self.context.tracking_uri)
        return self._client

    def callback(self) -> Any:
        """A Tune callback that logs each result to its trial's run and closes the run."""
        from ray import tune

        tracker = self

        class _Callback(tune.Callback):
            def on_trial_result(self, iteration, trials, trial, result, **info):
                tracker.submit(
                    tracker.trial_result, trial.trial_id, str(trial), dict(trial.config), result
                )

            def on_trial_complete(self, iteration, trials, trial, **info):
                result = trial.last_result or {}
                status = TrialStatus(result.get(STATUS, TrialStatus.FAILED))
                tracker.submit(
                    tracker.finish_trial,
                    trial.trial_id,
                    str(trial),
                    dict(trial.config),
                    TrialStatus.STOPPED if status == TrialStatus.RUNNING else status,
                    str(result.get("reason", "")),
                )

            def on_trial_error(self, iteration, trials, trial, **info):
                error = ""
                if trial.error_file and Path(trial.error_file).is_file():
                    lines = Path(trial.error_file).read_text().strip().splitlines()
                    error = lines[-1] if lines else ""
                tracker.submit(
                    tracker.finish_trial,
                    trial.trial_id,
                    str(trial),
                    dict(trial.config),
                    TrialStatus.FAILED,
                    error,
                )

        return _Callback()

    def trial_result(
        self, trial_id: str, trial_name: str, axes: Mapping[str, Any], result: Mapping[str, Any]
    ) -> None:
        """Logs a trial's result: an epoch's metrics, or just the run of a trial that ended."""
        with self._logging(trial_id):
            child = self._child(trial_id, trial_name, axes)
            if EPOCH in result:
                child.log_epoch(result)

    def finish_trial(
        self, trial_id: str, trial_name: str, axes: Mapping[str, Any], status: str, reason: str
    ) -> None:
        """Tags a trial's run with its final status and reason and ends it."""
        with self._logging(trial_id):
            self._child(trial_id, trial_name, axes).finish(status, reason)

    def _child(self, trial_id: str, trial_name: str, axes: Mapping[str, Any]) -> ChildRun:
        child = self._children.get(trial_id)
        if child is None:
            from versatil.sweep.trial_config import train_config_for

            try:
                config = train_config_for(dict(axes), self.sweep)
            except ConfigError:  # the trial fails with this message; log its axes alone
                config = None
            child = ChildRun.open(
                self.client,
                self.context,
                trial_id=trial_id,
                trial_name=trial_name,
                axes=axes,
                config=config,
            )
            self._children[trial_id] = child
        return child

    @contextlib.contextmanager
    def _logging(self, trial_id: str) -> Any:
        """Keeps the sweep going when the tracking store fails; warns once per trial."""
        try:
            yield
        except ConfigError:
            raise  # TrackingUnavailable: no parent run, so stop; the sweep can be resumed
        except Exception as error:  # a tracking outage must not stop training
            if trial_id not in self._failed:
                self._failed.add(trial_id)
                logger.warning(
                    "MLflow: could not log trial %s to %s (%s: %s); the sweep goes on and the "
                    "trial's results stay in the Tune experiment directory",
                    trial_id,
                    self.context.tracking_uri,
                    type(error).__name__,
                    error,
                )

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

    def finish_sweep(
        self,
        rows: list[Any],
        best: Any | None,
        summary: str,
        child_tags: Mapping[str, Mapping[str, str]] | None = None,
        parent_tags: Mapping[str, str] | None = None,
    ) -> None:
        """Closes every trial's run, logs checkpoints and the summary, ends the parent.

        Trials whose run was left open (a driver killed before it logged their end, then
        ``--resume``) or never made are closed here from Tune's own results. ``child_tags``
        (per trial id) and ``parent_tags`` are set on the runs (the Pareto ranking, the
        verdict).
        """
        self.drain()
        runs = {r.data.tags.get(TRIAL_ID_TAG): r for r in child_runs(self.client, self.context)}
        for row in rows:
            run = runs.get(row.trial_id)
            if run is None or run.info.status == "RUNNING":
                self.finish_trial(row.trial_id, row.trial_id, row.axes, row.status, row.reason)
                if row.trial_id in self._children:
                    runs[row.trial_id] = self.client.get_run(self._children[row.trial_id].run_id)
        chosen = {"all": rows, "best": [best] if best else [], "none": []}[self.log_checkpoints]
        if self.register_best and best is not None and best not in chosen:
            chosen = [*chosen, best]  # a registered model needs its checkpoint logged
        for row in chosen:
            run = runs.get(row.trial_id)
            if run is not None and row.checkpoint and Path(row.checkpoint).is_dir():
                log_checkpoint(self.client, run.info.run_id, row.checkpoint)
                if self.register_best and row is best:
                    self._register(run)
        for trial_id, tags in (child_tags or {}).items():
            run = runs.get(trial_id)
            for key, value in tags.items() if run is not None else ():
                self.client.set_tag(run.info.run_id, key, value)
        parent = self.context.parent_run_id
        for key, value in (parent_tags or {}).items():
            self.client.set_tag(parent, key, value[:5000])
        if best is not None:
            self.client.set_tag(parent, "versatil.best_trial_id", best.trial_id)
        self.client.log_text(parent, summary, "summary.txt")
        self.client.set_terminated(parent, "FINISHED")
