"""The sweep driver: a sweep run as phases, from its file to its answer.

Nothing here imports torch or Lightning; the trials do, in their (reused) workers.

:func:`run_sweep` runs the phases in this order, each a function of its own module:

1. **prepare** (:mod:`~versatil.sweep.engine.prepare`): everything bad input can fail,
   before anything starts: the task's params, the code to ship, the tracking store, the
   storage path, the experiment to start or resume; and the sweep file read into its
   plan (:class:`~versatil.sweep.plan.Plan`), the one input of every phase after it.
2. **track**: the sweep's MLflow run opens in a thread, while Ray starts.
3. **connect** (:mod:`~versatil.sweep.engine.shipping`): join the cluster (or start a
   local Ray) with the task's code.
4. **train** (:mod:`~versatil.sweep.engine.train`): the trials, as one Tune fit. A race
   (``search.algorithm: race``) screens the settings first
   (:mod:`~versatil.sweep.engine.race`), and its searcher trains them fastest first
   until one is faster and no worse (:mod:`~versatil.sweep.engine.race_search`).
5. **conclude** (:mod:`~versatil.sweep.engine.ending`): one row per trial, the verdict,
   and the re-timing of the settings in contention, which decides it.
6. **end**: Ray released (if asked), the end logged to MLflow, the run marked ended.

SIGINT or SIGTERM, in any phase, ends the sweep as interrupted instead, with its state
saved for ``resume`` (:mod:`~versatil.sweep.engine.stops`).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.connect import connect_ray
from versatil.sweep.engine.ending import (
    conclude_trials,
    end_sweep,
    rows_from_results,
    sync_command,
)
from versatil.sweep.engine.prepare import embedded_store, open_tracking, prepare
from versatil.sweep.engine.race import run_screen
from versatil.sweep.engine.shipping import connect_with
from versatil.sweep.engine.stops import Stops, end_interrupted
from versatil.sweep.engine.tracker import make_tracker
from versatil.sweep.engine.train import train
from versatil.sweep.results.judgement import Judgement
from versatil.sweep.results.records import TrialRecord, read_trials
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.storage import Storage
from versatil.sweep.tracking import TrackingContext, TrackingGap

__all__ = [
    "SweepOutcome",
    "connect_ray",
    "embedded_store",
    "release_ray_in_background",
    "rows_from_results",
    "run_sweep",
    "sync_command",
]


@dataclasses.dataclass
class SweepOutcome:
    """What a sweep produced.

    Attributes:
        experiment_dir: Tune's experiment directory (results and checkpoints), or its
            local mirror when the storage path is on object storage.
        rows: One row per trial.
        best: The answer's trial (the recommended one; with several objectives, the best on
            the Pareto set), or ``None`` when no trial produced a finite objective.
        wall_s: Seconds from start to the last trial's end.
        tracking: Where the sweep's MLflow runs are.
        judgement: The best trial, the Pareto ranking and the verdict.
        gap: What is not in the tracking store yet (it did not answer at the end), or
            ``None`` when everything is there.
        releasing_ray: The thread shutting Ray down (``run_sweep(release_ray=True)``);
            join it before the process ends.
        confirmation: The re-timing's rounds, when the candidates were re-timed.
        storage: The storage path, when it is on object storage.
        race: A race's screen and the settings it did not train.
        compute: The sweep's device-seconds by phase.
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
    race: dict[str, Any] | None = None
    compute: dict[str, Any] | None = None

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

    Raises:
        SweepInterrupted: when SIGINT or SIGTERM stopped the sweep (in the main thread,
            the handler of both while it runs): Tune's state and the MLflow runs are left
            for ``resume`` to continue (:mod:`~versatil.sweep.engine.stops`).
    """
    start = time.perf_counter()
    stops = Stops()
    with stops.installed():
        try:
            return _run_phases(
                config, stops, start, address, resume, auto_resume, tracking_uri,
                [stops.callback(), *callbacks], stream, on_start, release_ray,
            )  # fmt: skip
        except KeyboardInterrupt as interrupt:  # before the trials (Ray's start, say)
            stop = stops.stop_of(interrupt)
            if stop is None or stop is interrupt:
                raise
            raise stop from None


def _run_phases(
    config: SweepConfig,
    stops: Stops,
    start: float,
    address: str | None,
    resume: bool,
    auto_resume: bool,
    tracking_uri: str | None,
    callbacks: Sequence[Any],
    stream: TextIO | None,
    on_start: Callable[[Path], None] | None,
    release_ray: bool,
) -> SweepOutcome:
    """:func:`run_sweep`'s phases, in order, with its signal handler on."""
    # 1. prepare: bad input fails here, with nothing started.
    prepared = prepare(
        config,
        address=address,
        resume=resume,
        auto_resume=auto_resume,
        tracking_uri=tracking_uri,
        stream=stream,
    )
    # From here on, every phase reads the plan prepare made, not the sweep file.
    plan = prepared.plan
    # 2. track: MLflow opens while Ray starts (the first result comes seconds later).
    opening = open_tracking(prepared)
    # 3. connect: the task's code travels with the connection (Ray's runtime_env).
    print(plan.opening(address), file=stream or sys.stdout, flush=True)
    connect_with(prepared.shipment, address, stream or sys.stdout)
    stops.install()  # Ray's start put a handler of its own on SIGTERM
    storage, name = prepared.storage, prepared.name
    tracker = make_tracker(opening, plan, functools.partial(_records_now, storage, name))
    try:
        # 4. train: every trial, or the rest of them when resuming. A race screens first.
        screen = None
        if plan.search.algorithm == "race":
            screen = run_screen(plan, prepared, stream or sys.stdout)
        with stops.fit():
            results = train(plan, prepared, tracker, callbacks, stream, on_start, screen)
        # 5. conclude: rows from Tune's records, judged; the re-timing decides the verdict.
        concluded = conclude_trials(plan, prepared, results, stream)
        # 6. end: nothing below needs Ray, so it may go first (Tune's objects before it).
        releasing = None
        if release_ray:
            del results
            releasing = release_ray_in_background()
        gap = end_sweep(plan, prepared, tracker, concluded)
    except KeyboardInterrupt as interrupt:
        stop = stops.stop_of(interrupt)
        if stop is None:
            raise
        if not stop.at_once:
            stop.planned, stop.where = plan.planned_trials, storage.display(name)
            end_interrupted(stop, tracker, _records_now(storage, name))
        raise stop from None
    return SweepOutcome(
        experiment_dir=prepared.experiment_dir,
        rows=concluded.rows,
        best=concluded.judgement.best,
        wall_s=time.perf_counter() - start,
        tracking=tracker.context,
        judgement=concluded.judgement,
        gap=gap,
        releasing_ray=releasing,
        confirmation=concluded.confirmation,
        storage=storage if storage.remote else None,
        race=concluded.race,
        compute=concluded.compute,
    )


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
