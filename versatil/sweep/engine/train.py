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

from versatil.sweep.engine.console import ProgressPrinter, tune_console_quiet
from versatil.sweep.engine.prepared import Prepared
from versatil.sweep.engine.race import make_race_searcher
from versatil.sweep.engine.space import build_param_space
from versatil.sweep.engine.tune_objects import make_scheduler, make_searcher, objective_stopper
from versatil.sweep.plan import Plan
from versatil.sweep.results.records import read_trials
from versatil.sweep.tracking import backfill
from versatil.sweep.worker import run_trial

__all__ = ["train"]


def train(
    plan: Plan,
    prepared: Prepared,
    tracker: Any,
    callbacks: Sequence[Any],
    stream: TextIO | None,
    on_start: Callable[[Path], None] | None,
    screen: dict[str, Any] | None = None,
) -> Any:
    """Runs the sweep's trials (or the rest of them, resuming) and returns Tune's ResultGrid.

    Args:
        plan: The sweep's plan.
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

    progress = ProgressPrinter(plan, stream)
    live_callbacks = [progress.callback, tracker.callback(), *callbacks]
    tuner = _tuner(plan, prepared, tracker, screen)
    if prepared.resume:  # the trials earlier runs finished count in the progress lines
        records = read_trials(prepared.experiment_dir)  # (errored ones run again)
        progress.ended_before = sum(r.tune_status == "TERMINATED" for r in records)
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


def _trainable(plan: Plan) -> Any:
    """The worker's trial function with the trial's plan bound and the sweep's resources."""
    from ray import tune

    resources = plan.resources
    cache = plan.trial.compile_cache_dir()
    return tune.with_resources(
        tune.with_parameters(
            run_trial,
            plan=plan.trial,
            # On the storage path every node shares: each graph compiles once per cluster.
            compile_cache=str(cache) if cache is not None else None,
        ),
        # A data-parallel trial only coordinates; its Ray Train workers hold the resources.
        {"cpu": 0.01} if resources.distributed else {"cpu": resources.cpu, "gpu": resources.gpus},
    )


def _tuner(plan: Plan, prepared: Prepared, tracker: Any, screen: dict[str, Any] | None) -> Any:
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
            _trainable(plan),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=where.get("storage_filesystem"),
        )
    racing, objectives = screen is not None, plan.objectives
    return tune.Tuner(
        _trainable(plan),
        # A race's searcher gives whole points: it has no space of its own to sample.
        param_space={} if racing else build_param_space(plan),
        tune_config=tune.TuneConfig(
            # Several objectives: the searcher and scheduler hold theirs (see above).
            metric=None if objectives.is_multi else objectives.metric,
            mode=None if objectives.is_multi else objectives.mode,
            search_alg=make_race_searcher(plan, screen) if racing else make_searcher(plan),
            scheduler=make_scheduler(plan),
            num_samples=len(plan.points) if racing else plan.tune_samples,
            # Searchers get Tune's ConcurrencyLimiter; generators limit themselves.
            max_concurrent_trials=(
                plan.resources.max_concurrent_trials
                if plan.search.algorithm in ("optuna", "race")
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
                num_to_keep=None if plan.scheduler.type == "pbt" else 2
            ),
            failure_config=tune.FailureConfig(max_failures=plan.resources.max_failures),
            stop=objective_stopper(),
            verbose=0,
        ),
    )
