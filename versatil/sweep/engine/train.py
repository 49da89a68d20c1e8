"""A sweep's training phase: the grid (or searcher) of trials as one Tune fit.

The trainable is the worker's :func:`~versatil.sweep.worker.run_trial` with the sweep's
resources; the Tuner is new, or restored from the storage path when the sweep resumes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.console import ProgressPrinter, tune_console_quiet
from versatil.sweep.engine.prepare import Prepared
from versatil.sweep.engine.race import make_race_searcher, race_points
from versatil.sweep.engine.space import build_param_space
from versatil.sweep.engine.tune_objects import (
    make_scheduler,
    make_searcher,
    num_samples,
    objective_stopper,
)
from versatil.sweep.results.records import read_trials
from versatil.sweep.tracking import backfill
from versatil.sweep.worker import run_trial

__all__ = ["train"]


def train(
    config: SweepConfig,
    prepared: Prepared,
    tracker: Any,
    callbacks: Sequence[Any],
    stream: TextIO | None,
    on_start: Callable[[Path], None] | None,
    screen: dict[str, Any] | None = None,
) -> Any:
    """Runs the sweep's trials (or the rest of them, resuming) and returns Tune's ResultGrid.

    Args:
        config: The sweep.
        prepared: What :func:`~versatil.sweep.engine.prepare.prepare` chose.
        tracker: The sweep's MLflow tracker (its live callback logs each result).
        callbacks: Extra Tune callbacks.
        stream: Where progress lines go.
        on_start: Called with the experiment directory before trials start.
        screen: A race's screen (:mod:`~versatil.sweep.engine.race`): its searcher
            trains the settings in the screen's order of speed.
    """
    from ray import tune

    from versatil.sweep.engine.callbacks import registered

    progress = ProgressPrinter(config, stream)
    live_callbacks = [progress.callback, tracker.callback(), *callbacks]
    tuner = _tuner(config, prepared, tracker, screen)
    if on_start is not None:
        on_start(prepared.experiment_dir)
    # Tune warns about every trial without results; the summary reports those trials.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    try:
        with registered(prepared.name, live_callbacks), tune_console_quiet():
            return tuner.fit()
    except tune.TuneError:
        _ = tracker.context  # MLflow never opened: raises its one-line error
        raise


def _trainable(config: SweepConfig) -> Any:
    """The worker's trial function with the sweep bound and the sweep's resources."""
    from ray import tune

    resources = config.resources
    # A data-parallel trial only coordinates; its Ray Train workers hold the resources.
    distributed = resources.workers_per_trial > 1
    gpus = resources.gpus_for(config.trainer.accelerator)  # one by default with gpu or cuda
    return tune.with_resources(
        tune.with_parameters(
            run_trial,
            # Absolute: a worker's working directory is its trial's, not the driver's.
            sweep=config.model_copy(update={"storage_path": _absolute(config)}),
            # On the storage path every node shares: each graph compiles once per cluster.
            compile_cache=str(config.compile_cache_dir()) if config.trainer.compile_cache else None,
        ),
        {"cpu": 0.01} if distributed else {"cpu": resources.cpu, "gpu": gpus},
    )


def _tuner(
    config: SweepConfig, prepared: Prepared, tracker: Any, screen: dict[str, Any] | None
) -> Any:
    """A new Tuner, or the one a resumed sweep restores from its storage path."""
    from ray import tune

    from versatil.sweep.engine.callbacks import CsvLogger, DriverCallbacks, JsonLogger

    storage, name = prepared.storage, prepared.name
    if prepared.resume:
        # A restored Tuner keeps its pickled callbacks: DriverCallbacks among them forwards
        # to this driver's live ones. First, what the last driver left out of MLflow.
        records = read_trials(prepared.experiment_dir)
        tracker.submit(functools.partial(backfill, close=True), tracker, records)
        where = storage.tune_arguments(name)
        return tune.Tuner.restore(
            where["storage_path"],
            _trainable(config),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=where.get("storage_filesystem"),
        )
    racing = screen is not None
    return tune.Tuner(
        _trainable(config),
        # A race's searcher gives whole points: it has no space of its own to sample.
        param_space={} if racing else build_param_space(config),
        tune_config=tune.TuneConfig(
            # Several objectives: the searcher and scheduler hold theirs (see above).
            metric=None if config.objective.is_multi else config.objective.metric,
            mode=None if config.objective.is_multi else config.objective.mode,
            search_alg=make_race_searcher(config, screen) if racing else make_searcher(config),
            scheduler=make_scheduler(config),
            num_samples=len(race_points(config)) if racing else num_samples(config),
            # Searchers get Tune's ConcurrencyLimiter; generators limit themselves.
            max_concurrent_trials=(
                config.max_concurrent_trials
                if config.search.algorithm in ("optuna", "race")
                else None
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


def _absolute(config: SweepConfig) -> str:
    """The storage path as every process reads it: absolute, or the URI as given."""
    location = config.location()
    return location.value if location.remote else str(location.directory())
