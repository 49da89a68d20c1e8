"""The sweep driver: builds the Tuner from a SweepConfig, runs or resumes it, summarizes it.

Nothing here imports torch or Lightning; the trials do, in their (reused) workers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from versatil.errors import ConfigError, ServiceError
from versatil.status import TrialStatus
from versatil.sweep.config.checks import check_storage, check_task
from versatil.sweep.config.schema import NumericAxis, SweepConfig
from versatil.sweep.engine.space import build_param_space, grid_points, numeric_domain
from versatil.sweep.results.judgement import Judgement, judge
from versatil.sweep.results.records import make_row, read_trials
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.tracking import (
    SweepEnd,
    SweepTracker,
    TrackingContext,
    TrackingGap,
    backfill,
    check_server,
    close_sweep,
    default_tracking_uri,
    open_sweep_run,
)
from versatil.sweep.vocab.keys import OBJECTIVE_MISSING, REASON, STATUS
from versatil.sweep.worker.trial import run_trial

SWEEP_FILE = "sweep.yaml"
"""In the experiment directory: the sweep as it ran (``sync`` reads it back)."""

__all__ = ["SweepOutcome", "connect_ray", "experiment_dirs", "rows_from_results", "run_sweep"]


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep produced.

    Attributes:
        experiment_dir: Tune's experiment directory (results and checkpoints).
        rows: One row per trial.
        best: The best trial, or ``None`` when no trial produced a finite objective.
        wall_s: Seconds from start to the last trial's end.
        tracking: Where the sweep's MLflow runs are.
        judgement: The best trial, the Pareto ranking and the verdict.
        gap: What is not in the tracking store yet (it did not answer at the end), or
            ``None`` when everything is there.
    """

    experiment_dir: Path
    rows: list[TrialRow]
    best: TrialRow | None
    wall_s: float
    tracking: TrackingContext
    judgement: Judgement | None = None
    gap: TrackingGap | None = None


def connect_ray(address: str | None) -> None:
    """Connects to the cluster at ``address``, or starts a local Ray; no-op if connected."""
    import ray

    if ray.is_initialized():
        return
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            configure_logging=True,
        )
    except ConnectionError as error:
        raise ConfigError(
            f"--address: cannot reach a Ray cluster at {address!r} ({error}); "
            "start one with `ray start --head` or omit --address to run locally"
        ) from None
    except Exception as error:  # Ray raises a bare Exception when its node starts slowly
        if address is not None:
            raise
        # A local Ray waits 30 s for its raylet; a loaded machine can miss that once.
        ray.shutdown()
        try:
            ray.init(include_dashboard=False, logging_level=logging.WARNING, configure_logging=True)
        except Exception as again:
            ray.shutdown()
            raise ServiceError(
                f"a local Ray did not start, twice ({again}; first: {error}); "
                "the machine may be overloaded: retry when it is less busy, or start Ray "
                "yourself with `ray start --head` and pass --address auto"
            ) from None


# Registries of lazy imports: a sweep that uses FIFO never imports optuna.
def _make_searcher(config: SweepConfig) -> Any:
    if config.search.algorithm == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        if config.objective.is_multi:  # Optuna's multi-objective sampler; not via TuneConfig
            metrics, modes = zip(*config.objective.objectives, strict=True)
            return OptunaSearch(metric=list(metrics), mode=list(modes), seed=config.search.seed)
        return OptunaSearch(seed=config.search.seed)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    # Tune ignores TuneConfig.max_concurrent_trials for a generator it is handed: the
    # generator itself takes the limit.
    limit = config.max_concurrent_trials or 0
    if config.search.algorithm == "random":
        return BasicVariantGenerator(random_state=config.search.seed, max_concurrent=limit)
    # Grid: every combination given as a point, in the order of grid_points (each
    # compiled graph first once, then its repeats); sampled axes are drawn per point.
    points = grid_points(config) * config.search.num_samples
    return BasicVariantGenerator(
        points_to_evaluate=points, random_state=config.search.seed, max_concurrent=limit
    )


def _num_samples(config: SweepConfig) -> int:
    """Tune's ``num_samples``: a grid sweep's points each take one sample."""
    if config.search.algorithm == "grid":
        return len(grid_points(config)) * config.search.num_samples
    return config.search.num_samples


def _make_scheduler(config: SweepConfig) -> Any:
    section = config.scheduler
    # One objective: TuneConfig passes it on. Several: the scheduler gets its own one.
    metric, mode = config.scheduler_objective
    own = {"metric": metric, "mode": mode} if config.objective.is_multi else {}
    if section.type == "asha":
        from ray.tune.schedulers import ASHAScheduler

        return ASHAScheduler(
            time_attr="training_iteration",
            max_t=config.trainer.max_epochs,
            grace_period=section.grace_period,
            reduction_factor=section.reduction_factor,
            **own,
        )
    if section.type == "pbt":
        from ray.tune.schedulers import PopulationBasedTraining

        return PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=section.perturbation_interval,
            hyperparam_mutations={
                name: numeric_domain(axis) if isinstance(axis, NumericAxis) else axis
                for name, axis in section.hyperparam_mutations.items()
            },
            quantile_fraction=section.quantile_fraction,
            synch=section.synch,
            **own,
        )
    return None


def _objective_stopper() -> Any:
    """Stops the whole sweep at the first result saying the module never logged the objective.

    Every trial runs the same module, so the others would fail the same way: the trials
    still running end at once and the ones not started never start.
    """
    from ray import tune

    class _Stopper(tune.Stopper):
        def __init__(self) -> None:
            self.missing = False

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            if result.get(OBJECTIVE_MISSING):
                self.missing = True
            return self.missing

        def stop_all(self) -> bool:
            return self.missing

    return _Stopper()


class ProgressPrinter:
    """Prints one line per reported epoch and per finished trial (a Tune callback)."""

    def __init__(self, config: SweepConfig, stream: TextIO | None = None) -> None:
        from ray import tune

        class _Callback(tune.Callback):
            def on_trial_result(cb, iteration, trials, trial, result, **info):
                self._line(trial, result)

            def on_trial_error(cb, iteration, trials, trial, **info):
                self._print(f"{trial.trial_id} failed: see {trial.path}")

        self.callback = _Callback()
        self.config = config
        self.stream = stream or sys.stdout  # looked up now: a redirected stdout counts
        self.start = time.perf_counter()

    def _print(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.start:6.1f}s] {text}", file=self.stream, flush=True)

    def _line(self, trial: Any, result: dict[str, Any]) -> None:
        axes = " ".join(f"{k}={trial.config.get(k)}" for k in self.config.space)
        status = result.get(STATUS, "")
        if status in (TrialStatus.INFEASIBLE, TrialStatus.FAILED):
            self._print(f"{trial.trial_id} {status}: {result.get(REASON, '')} ({axes})")
            return
        epoch = result.get("epoch", 0) + 1
        values = " ".join(
            f"{metric}={result.get(metric, 0):.4g}"
            for metric, _ in self.config.objective.objectives
            if metric != "samples_per_sec"
        )
        self._print(
            f"{trial.trial_id} epoch {epoch} {values} "
            f"samples/s={result.get('samples_per_sec', 0):.0f} {status} ({axes})"
        )


@contextlib.contextmanager
def _tune_console_quiet() -> Any:
    """Keeps Tune's own console output off while the sweep runs.

    At ``verbose=0`` Tune's default output engine still prints a "Configuration for
    experiment" box and "View detailed results here"; the sweep prints its own progress,
    summary and paths. ``RAY_AIR_NEW_OUTPUT=0`` selects Tune's other engine, which prints
    nothing at ``verbose=0``. Set for the fit only, unless the environment already says.
    """
    key = "RAY_AIR_NEW_OUTPUT"
    if key in os.environ:
        yield
        return
    os.environ[key] = "0"
    try:
        yield
    finally:
        os.environ.pop(key, None)


def experiment_dirs(config: SweepConfig) -> list[Path]:
    """Earlier runs of this sweep under its storage path, oldest first."""
    root = config.storage_dir()
    return sorted(root.glob(f"{config.name}-2*")) if root.is_dir() else []


def rows_from_results(results: Any, config: SweepConfig) -> list[TrialRow]:
    """Turns a Tune ResultGrid into summary rows, in trial order."""
    rows = []
    for result in results:
        metrics = dict(result.metrics or {})
        error = None
        if result.error is not None:
            error = str(result.error).strip() or type(result.error).__name__
        rows.append(
            make_row(
                trial_id=metrics.get("trial_id") or Path(result.path).name,
                config=result.config or {},
                metrics=metrics,
                error=error,
                checkpoint=result.checkpoint.path if result.checkpoint else None,
                axes=list(config.space),
                objective=config.objective.metric,
            )
        )
    return sorted(rows, key=lambda r: r.trial_id)


def _not_run(row: TrialRow) -> TrialRow:
    """A trial the sweep never started because it stopped early."""
    reason = "not run: the sweep stopped when the objective metric was found missing"
    return dataclasses.replace(row, status=TrialStatus.STOPPED, reason=reason)


def run_sweep(
    config: SweepConfig,
    *,
    address: str | None = None,
    resume: bool = False,
    tracking_uri: str | None = None,
    callbacks: Sequence[Any] = (),
    stream: TextIO | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> SweepOutcome:
    """Runs (or with ``resume`` continues) a sweep on Ray Tune and summarizes it.

    Args:
        config: The validated sweep.
        address: A Ray cluster to connect to; ``None`` starts (or reuses) a local Ray.
        resume: Continue the latest interrupted run of this sweep; finished trials are
            not rerun.
        tracking_uri: The MLflow tracking URI; default ``mlflow.tracking_uri`` of the sweep,
            else an embedded SQLite file under the storage path.
        callbacks: Extra Tune callbacks.
        stream: Where progress lines go; default ``sys.stdout`` when it is called.
        on_start: Called with the experiment directory before trials start.
    """
    from ray import tune

    start = time.perf_counter()
    check_task(config)  # a typo in a param fails here, before Ray starts
    # Checkpointing every epoch forces experiment snapshots; they are cheap on local disk.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Tune's default TensorBoard logger imports torch into the driver (3 s) and duplicates
    # MLflow; its CSV and JSON loggers (progress.csv, result.json) are added below.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    storage = check_storage(config)  # unwritable: one clear error before Ray starts
    if resume:
        previous = [d for d in experiment_dirs(config) if tune.Tuner.can_restore(d)]
        if not previous:
            raise ConfigError(
                f"--resume: no earlier run of sweep {config.name!r} under {storage} to resume; "
                "run it without --resume first"
            )
        experiment_dir = previous[-1]
    else:
        experiment_dir = storage / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    uri = tracking_uri or config.mlflow.tracking_uri or default_tracking_uri(storage)
    check_server(uri)
    sweep_yaml = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    if not resume:  # what `sync` reads back: the sweep as validated, overrides applied
        experiment_dir.mkdir(parents=True, exist_ok=True)
        (experiment_dir / SWEEP_FILE).write_text(sweep_yaml)
    # Opening MLflow (imports, a new store's schema) overlaps starting Ray, Tune and the
    # first workers' imports: the driver logs the first result only seconds later.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow")
    opening = pool.submit(
        open_sweep_run,
        tracking_uri=uri,
        experiment=config.experiment_name,
        experiment_dir=experiment_dir,
        storage_dir=storage,
        sweep_yaml=sweep_yaml,
        objective=config.objective.metric,
        mode=config.objective.mode,
        objectives=config.objective.objectives,
        tolerance=config.objective.tolerance,
    )
    pool.shutdown(wait=False)
    connect_ray(address)
    sweep_tracker = SweepTracker(opening, config, experiment_dir)
    resources = config.resources
    # A data-parallel trial only coordinates; its Ray Train workers hold the resources.
    distributed = resources.workers_per_trial > 1
    trainable = tune.with_resources(
        tune.with_parameters(
            run_trial,
            sweep=config,
            # On the storage path every node shares: each graph compiles once per cluster.
            compile_cache=str(config.compile_cache_dir()) if config.trainer.compile_cache else None,
        ),
        {"cpu": 0.01} if distributed else {"cpu": resources.cpu, "gpu": resources.gpu},
    )
    progress = ProgressPrinter(config, stream)
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    from versatil.sweep.engine.callbacks import DriverCallbacks, registered

    live_callbacks = [progress.callback, sweep_tracker.callback(), *callbacks]
    if resume:
        # A restored Tuner keeps its pickled callbacks: DriverCallbacks among them forwards
        # to this driver's live ones. First, what the last driver left out of MLflow.
        records = read_trials(experiment_dir)
        sweep_tracker.submit(functools.partial(backfill, close=True), sweep_tracker, records)
        tuner = tune.Tuner.restore(
            str(experiment_dir), trainable, resume_unfinished=True, resume_errored=True
        )
    else:
        name = experiment_dir.name
        tuner = tune.Tuner(
            trainable,
            param_space=build_param_space(config),
            tune_config=tune.TuneConfig(
                # Several objectives: the searcher and scheduler hold theirs (see above).
                metric=None if config.objective.is_multi else config.objective.metric,
                mode=None if config.objective.is_multi else config.objective.mode,
                search_alg=_make_searcher(config),
                scheduler=_make_scheduler(config),
                num_samples=_num_samples(config),
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
                storage_path=str(storage),
                callbacks=[
                    DriverCallbacks(experiment_dir.name),
                    CSVLoggerCallback(),
                    JsonLoggerCallback(),
                ],
                # PBT exploits other trials' older checkpoints: keep them all there.
                checkpoint_config=tune.CheckpointConfig(
                    num_to_keep=None if config.scheduler.type == "pbt" else 2
                ),
                failure_config=tune.FailureConfig(max_failures=config.max_failures),
                stop=_objective_stopper(),
                verbose=0,
            ),
        )
    if on_start is not None:
        on_start(experiment_dir)
    # Tune warns about every trial without results; the summary reports those trials.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    try:
        with registered(experiment_dir.name, live_callbacks), _tune_console_quiet():
            results = tuner.fit()
    except tune.TuneError:
        _ = sweep_tracker.context  # MLflow never opened: raises its one-line error
        raise
    rows = rows_from_results(results, config)
    missing = next((r for r in rows if r.metrics.get(OBJECTIVE_MISSING)), None)
    if missing is not None:
        rows = [r if STATUS in r.metrics else _not_run(r) for r in rows]
    judgement = judge(rows, config.objective.objectives, config.objective.tolerance)
    best = judgement.best
    end = SweepEnd.judged(rows, judgement)
    gap = close_sweep(sweep_tracker, rows, read_trials(experiment_dir), end, sync_command(config))
    if missing is not None:
        ran = sum(STATUS in r.metrics for r in rows)
        raise ConfigError(
            f"{missing.reason}. The sweep stopped at that result: every trial runs the same "
            f"module ({ran} of {len(rows)} trials started, none trained past this epoch); "
            f"its runs are under {experiment_dir}"
        )
    return SweepOutcome(
        experiment_dir=experiment_dir,
        rows=rows,
        best=best,
        wall_s=time.perf_counter() - start,
        tracking=sweep_tracker.context,
        judgement=judgement,
        gap=gap,
    )


def sync_command(config: SweepConfig) -> str:
    """The command that backfills this sweep's runs from its storage path."""
    return f"python -m versatil.sweep sync {config.name} --storage-path {config.storage_dir()}"
