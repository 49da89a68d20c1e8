"""A sweep's first phases: what is checked and chosen before Ray starts, and MLflow opened.

:func:`prepare` does everything a bad input can fail, in an order where each check needs
only what came before it, so that a bad sweep file, task, ``runtime_env``, storage path or
tracking store is one clear error with nothing started. :func:`open_tracking` then opens
the sweep's MLflow run in a thread, overlapping Ray's start.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from pathlib import Path
from typing import Any, TextIO

import yaml

from versatil.sweep.config.checks import check_storage, check_task
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.resume import choose_experiment
from versatil.sweep.engine.shipping import Shipment, plan_for
from versatil.sweep.storage import Storage, embedded_store_directory
from versatil.sweep.tracking import (
    PARENT_FILE,
    TrackingContext,
    check_server,
    default_tracking_uri,
    open_sweep_run,
    tracking_store,
)
from versatil.sweep.vocab.names import SWEEP_FILE

__all__ = ["Prepared", "embedded_store", "open_tracking", "prepare"]


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What a sweep knows before Ray starts.

    Attributes:
        storage: The storage path, proven writable.
        name: Tune's experiment name: a new run's, or the one a resume continues.
        resume: Whether this run continues an earlier one.
        experiment_dir: The experiment's directory (its local mirror on object storage).
        tracking_uri: The MLflow store, proven reachable.
        sweep_yaml: The sweep as validated, as stored and logged.
        shipment: The task's code for a cluster's nodes (Ray's ``runtime_env``).
    """

    storage: Storage
    name: str
    resume: bool
    experiment_dir: Path
    tracking_uri: str
    sweep_yaml: str
    shipment: Shipment


def prepare(
    config: SweepConfig,
    *,
    address: str | None,
    resume: bool,
    auto_resume: bool,
    tracking_uri: str | None,
    stream: TextIO | None,
) -> Prepared:
    """Checks the sweep against its task, code, store and storage; chooses its experiment.

    Raises:
        ConfigError: for a bad param, ``runtime_env``, storage path or tracking store.
        ServiceError: for a tracking server that does not answer.
    """
    check_task(config)  # a typo in a param fails here, before Ray starts
    # The task's code for a cluster's nodes: a missing path or an upload over Ray's limit
    # fails here too, before anything starts.
    shipment = plan_for(config, address)
    # Checkpointing every epoch forces experiment snapshots; they are cheap on local disk.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Tune's default TensorBoard logger imports torch into the driver (3 s) and duplicates
    # MLflow; its CSV and JSON loggers (progress.csv, result.json) are added by the Tuner.
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
    return Prepared(storage, name, resume, experiment_dir, uri, sweep_yaml, shipment)


def open_tracking(
    config: SweepConfig, prepared: Prepared
) -> concurrent.futures.Future[TrackingContext]:
    """Opens the sweep's MLflow run in a thread; its future gives the run.

    Opening MLflow (imports, a new store's schema) overlaps starting Ray, Tune and the
    first workers' imports: the driver logs the first result only seconds later.
    """
    storage = prepared.storage
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow")
    opening = pool.submit(
        _open_sweep_run,
        storage,
        tracking_uri=prepared.tracking_uri,
        experiment=config.experiment_name,
        experiment_dir=prepared.experiment_dir,
        experiment_uri=storage.display(prepared.name),
        storage_dir=None if storage.remote else config.storage_dir(),
        sweep_yaml=prepared.sweep_yaml,
        objective=config.objective.metric,
        mode=config.objective.mode,
        objectives=config.objective.objectives,
        tolerance=config.objective.tolerance,
    )
    pool.shutdown(wait=False)
    return opening


def embedded_store(config: SweepConfig) -> str:
    """The embedded MLflow store: a SQLite file under a local storage path.

    Raises:
        ConfigError: on object storage, which cannot hold a SQLite database.
    """
    return default_tracking_uri(embedded_store_directory("storage_path", config.storage_path))


def _open_sweep_run(storage: Storage, **arguments: Any) -> TrackingContext:
    """:func:`open_sweep_run`, its record of the parent run then written to the store."""
    context = open_sweep_run(**arguments)
    storage.push(arguments["experiment_dir"].name, PARENT_FILE)
    return context
