"""The sweep driver: builds the Tuner from a SweepConfig, runs or resumes it, summarizes it.

Nothing here imports torch or Lightning; the trials do, in their (reused) workers.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.config.checks import check_storage, check_task
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.conclude import conclude
from versatil.sweep.engine.confirm import confirm_or_explain, plan
from versatil.sweep.engine.connect import connect_ray
from versatil.sweep.engine.console import ProgressPrinter, tune_console_quiet
from versatil.sweep.engine.resume import choose_experiment, mark_ended
from versatil.sweep.engine.shipping import connect_with, plan_for
from versatil.sweep.engine.space import build_param_space
from versatil.sweep.engine.tracker import make_tracker, sweep_end
from versatil.sweep.engine.tune_objects import (
    make_scheduler,
    make_searcher,
    num_samples,
    objective_stopper,
)
from versatil.sweep.results.judgement import Judgement
from versatil.sweep.results.records import TrialRecord, axes_of, read_trials
from versatil.sweep.results.rows import TrialRow, make_row
from versatil.sweep.storage import Storage, embedded_store_directory
from versatil.sweep.tracking import (
    PARENT_FILE,
    TrackingContext,
    TrackingGap,
    backfill,
    check_server,
    close_sweep,
    default_tracking_uri,
    open_sweep_run,
    tracking_store,
)
from versatil.sweep.vocab.keys import EPOCH, OBJECTIVE_MISSING, STATUS
from versatil.sweep.vocab.names import SWEEP_FILE
from versatil.sweep.worker import run_trial

__all__ = [
    "SweepOutcome",
    "connect_ray",
    "release_ray_in_background",
    "rows_from_results",
    "run_sweep",
]


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep produced.

    Attributes:
        experiment_dir: Tune's experiment directory (results and checkpoints), or its
            local mirror when the storage path is on object storage.
        rows: One row per trial.
        best: The best trial, or ``None`` when no trial produced a finite objective.
        wall_s: Seconds from start to the last trial's end.
        tracking: Where the sweep's MLflow runs are.
        judgement: The best trial, the Pareto ranking and the verdict.
        gap: What is not in the tracking store yet (it did not answer at the end), or
            ``None`` when everything is there.
        releasing_ray: The thread shutting Ray down (``run_sweep(release_ray=True)``);
            join it before the process ends.
        confirmation: The re-timing's rounds, when the candidates were re-timed.
    """

    experiment_dir: Path
    rows: list[TrialRow]
    best: TrialRow | None
    wall_s: float
    tracking: TrackingContext
    judgement: Judgement | None = None
    gap: TrackingGap | None = None
    releasing_ray: threading.Thread | None = None
    confirmation: dict[str, Any] | None = None
    storage: Storage | None = None

    @property
    def where(self) -> str:
        """Where the results are, as printed: the directory or its URI (no secrets)."""
        if self.storage is None:
            return str(self.experiment_dir)
        return self.storage.display(self.experiment_dir.name)


def release_ray_in_background() -> threading.Thread:
    """Shuts Ray down in a thread (a local cluster takes a second or two to stop).

    Call it once :func:`run_sweep` has returned: its Tune objects are collected first,
    so that no finalizer reaches Ray's worker after it stopped.
    """
    import ray

    gc.collect()
    thread = threading.Thread(target=ray.shutdown, name="ray-shutdown", daemon=True)
    thread.start()
    return thread


def rows_from_results(
    results: Any,
    config: SweepConfig,
    records: Sequence[TrialRecord] = (),
    storage: Storage | None = None,
) -> list[TrialRow]:
    """Turns a Tune ResultGrid into summary rows, in trial order.

    Args:
        results: Tune's ResultGrid.
        config: The sweep.
        records: Tune's records of the same trials (:func:`read_trials`): every epoch a
            trial reported, before a restore too, where the grid holds the last run's.
        storage: The storage path; on object storage, a row's checkpoint is its place in
            the local mirror (see :mod:`versatil.sweep.storage`).
    """
    by_id = {record.trial_id: record for record in records}
    results = list(results)
    axes = axes_of(config, [result.config or {} for result in results])
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
                objective=config.objective.metric,
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


def run_sweep(
    config: SweepConfig,
    *,
    address: str | None = None,
    resume: bool = False,
    auto_resume: bool = False,
    tracking_uri: str | None = None,
    callbacks: Sequence[Any] = (),
    stream: TextIO | None = None,
    on_start: Callable[[Path], None] | None = None,
    release_ray: bool = False,
) -> SweepOutcome:
    """Runs (or with ``resume`` continues) a sweep on Ray Tune and summarizes it.

    Args:
        config: The validated sweep.
        address: A Ray cluster to connect to; ``None`` starts (or reuses) a local Ray.
        resume: Continue the latest interrupted run of this sweep; finished trials are
            not rerun.
        auto_resume: Continue the latest run if it was interrupted, else start a new one.
        tracking_uri: The MLflow tracking URI; default ``mlflow.tracking_uri`` of the sweep,
            else ``MLFLOW_TRACKING_URI``, else an embedded SQLite file under the storage path.
        callbacks: Extra Tune callbacks.
        stream: Where progress lines go; default ``sys.stdout`` when it is called.
        on_start: Called with the experiment directory before trials start.
        release_ray: Shut Ray down in the background once the trials are over, while the
            sweep's end is logged (for a command that owns its process: nothing after
            the fit needs Ray; see :attr:`SweepOutcome.releasing_ray`).
    """
    from ray import tune

    start = time.perf_counter()
    check_task(config)  # a typo in a param fails here, before Ray starts
    # The task's code for a cluster's nodes: a missing path or an upload over Ray's limit
    # fails here too, before anything starts.
    shipment = plan_for(config, address)
    # Checkpointing every epoch forces experiment snapshots; they are cheap on local disk.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Tune's default TensorBoard logger imports torch into the driver (3 s) and duplicates
    # MLflow; its CSV and JSON loggers (progress.csv, result.json) are added below.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    named = tracking_store(
        ("--tracking-uri", tracking_uri), ("mlflow.tracking_uri", config.mlflow.tracking_uri)
    )
    uri, source = named or (embedded_store(config), "storage_path")
    storage = check_storage(config)  # unwritable: one clear error before Ray starts
    name, resume = choose_experiment(config, storage, resume, auto_resume, stream)
    experiment_dir = storage.pull(name)  # the records a resumed run goes on from
    check_server(uri, source=source)
    sweep_yaml = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    if not resume:  # what `sync` reads back: the sweep as validated, overrides applied
        storage.write_text(sweep_yaml, name, SWEEP_FILE)
    # Opening MLflow (imports, a new store's schema) overlaps starting Ray, Tune and the
    # first workers' imports: the driver logs the first result only seconds later.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow")
    opening = pool.submit(
        _open_sweep_run,
        storage,
        tracking_uri=uri,
        experiment=config.experiment_name,
        experiment_dir=experiment_dir,
        experiment_uri=storage.display(name),
        storage_dir=None if storage.remote else config.storage_dir(),
        sweep_yaml=sweep_yaml,
        objective=config.objective.metric,
        mode=config.objective.mode,
        objectives=config.objective.objectives,
        tolerance=config.objective.tolerance,
    )
    pool.shutdown(wait=False)
    connect_with(shipment, address, stream or sys.stdout)
    sweep_tracker = make_tracker(opening, config, functools.partial(_records_now, storage, name))
    resources = config.resources
    # A data-parallel trial only coordinates; its Ray Train workers hold the resources.
    distributed = resources.workers_per_trial > 1
    gpus = resources.gpus_for(config.trainer.accelerator)  # one by default with gpu or cuda
    trainable = tune.with_resources(
        tune.with_parameters(
            run_trial,
            # Absolute: a worker's working directory is its trial's, not the driver's.
            sweep=config.model_copy(update={"storage_path": _absolute(config)}),
            # On the storage path every node shares: each graph compiles once per cluster.
            compile_cache=str(config.compile_cache_dir()) if config.trainer.compile_cache else None,
        ),
        {"cpu": 0.01} if distributed else {"cpu": resources.cpu, "gpu": gpus},
    )
    progress = ProgressPrinter(config, stream)
    from versatil.sweep.engine.callbacks import CsvLogger, DriverCallbacks, JsonLogger, registered

    live_callbacks = [progress.callback, sweep_tracker.callback(), *callbacks]
    if resume:
        # A restored Tuner keeps its pickled callbacks: DriverCallbacks among them forwards
        # to this driver's live ones. First, what the last driver left out of MLflow.
        records = read_trials(experiment_dir)
        sweep_tracker.submit(functools.partial(backfill, close=True), sweep_tracker, records)
        where = storage.tune_arguments(name)
        tuner = tune.Tuner.restore(
            where["storage_path"],
            trainable,
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=where.get("storage_filesystem"),
        )
    else:
        tuner = tune.Tuner(
            trainable,
            param_space=build_param_space(config),
            tune_config=tune.TuneConfig(
                # Several objectives: the searcher and scheduler hold theirs (see above).
                metric=None if config.objective.is_multi else config.objective.metric,
                mode=None if config.objective.is_multi else config.objective.mode,
                search_alg=make_searcher(config),
                scheduler=make_scheduler(config),
                num_samples=num_samples(config),
                # Optuna's searcher gets Tune's ConcurrencyLimiter; generators limit themselves.
                max_concurrent_trials=(
                    config.max_concurrent_trials if config.search.algorithm == "optuna" else None
                ),
                # Warm workers: a worker process pays the torch/Lightning imports once
                # and runs trial after trial (the trial resets process-wide state).
                reuse_actors=True,
                trial_dirname_creator=lambda trial: trial.trial_id,
            ),
            run_config=tune.RunConfig(
                name=name,
                **storage.tune_arguments(),
                # Tune's CSV and JSON loggers, but a trial's restart (each PBT
                # perturbation, a retry) keeps the driver's copy of its files.
                callbacks=[DriverCallbacks(name), CsvLogger(), JsonLogger()],
                # PBT exploits other trials' older checkpoints: keep them all there.
                checkpoint_config=tune.CheckpointConfig(
                    num_to_keep=None if config.scheduler.type == "pbt" else 2
                ),
                failure_config=tune.FailureConfig(max_failures=config.max_failures),
                stop=objective_stopper(),
                verbose=0,
            ),
        )
    if on_start is not None:
        on_start(experiment_dir)
    # Tune warns about every trial without results; the summary reports those trials.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    try:
        with registered(name, live_callbacks), tune_console_quiet():
            results = tuner.fit()
    except tune.TuneError:
        _ = sweep_tracker.context  # MLflow never opened: raises its one-line error
        raise
    records = read_trials(storage.pull(name))
    rows = rows_from_results(results, config, records, storage)
    missing = next((r for r in rows if r.metrics.get(OBJECTIVE_MISSING)), None)
    if missing is not None:
        rows = [r if STATUS in r.metrics else _not_run(r) for r in rows]
    rows, judgement = conclude(config, rows, records)
    confirmation = None
    found = plan(config, rows, judgement) if missing is None else []
    if found:
        confirmation = confirm_or_explain(config, found, stream or sys.stdout)
        if confirmation is not None:
            rows, judgement = conclude(config, rows, records, confirmation)
    releasing = None
    if release_ray:  # nothing below needs Ray; Tune's objects (and their refs) go first
        del results, tuner, trainable
        releasing = release_ray_in_background()
    best = judgement.best
    end = sweep_end(rows, judgement, confirmation)
    gap = close_sweep(sweep_tracker, rows, records, end, sync_command(config))
    if gap is None:  # else its end is not in MLflow yet: --auto-resume would log it
        mark_ended(storage, name, sweep_tracker.context.parent_run_id, len(rows))
    if missing is not None:
        ran = sum(STATUS in r.metrics for r in rows)
        raise ConfigError(
            f"{missing.reason}. The sweep stopped at that result: every trial runs the same "
            f"module ({ran} of {len(rows)} trials started, none trained past this epoch); "
            f"its runs are under {storage.display(name)}"
        )
    return SweepOutcome(
        experiment_dir=experiment_dir,
        rows=rows,
        best=best,
        wall_s=time.perf_counter() - start,
        tracking=sweep_tracker.context,
        judgement=judgement,
        gap=gap,
        releasing_ray=releasing,
        confirmation=confirmation,
        storage=storage if storage.remote else None,
    )


def sync_command(config: SweepConfig) -> str:
    """The command that backfills this sweep's runs from its storage path."""
    storage = config.location().display()
    return f"python -m versatil.sweep sync {config.name} --storage-path {storage}"


def _absolute(config: SweepConfig) -> str:
    """The storage path as every process reads it: absolute, or the URI as given."""
    location = config.location()
    return location.value if location.remote else str(location.directory())


def embedded_store(config: SweepConfig) -> str:
    """The embedded MLflow store: a SQLite file under a local storage path.

    Raises:
        ConfigError: on object storage, which cannot hold a SQLite database.
    """
    return default_tracking_uri(embedded_store_directory("storage_path", config.storage_path))


def _records_now(storage: Storage, name: str) -> list[TrialRecord]:
    """Tune's records so far, for a backfill after an outage of MLflow.

    A storage path that fails here gives none (the sweep's end reads them again): its
    failure must not count as MLflow's.
    """
    try:
        return read_trials(storage.pull(name))
    except OSError as error:  # pyarrow's errors included
        logging.getLogger(__name__).warning("Tune's records not read from %s: %s", name, error)
        return []


def _open_sweep_run(storage: Storage, **arguments: Any) -> TrackingContext:
    """:func:`open_sweep_run`, its record of the parent run then written to the store."""
    context = open_sweep_run(**arguments)
    storage.push(arguments["experiment_dir"].name, PARENT_FILE)
    return context
