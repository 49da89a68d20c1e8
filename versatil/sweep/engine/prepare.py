"""A sweep's first phases: what is checked and chosen before Ray starts, and MLflow opened.

:func:`prepare` does everything a bad input can fail, in an order where each check needs
only what came before it, so that a bad sweep file, task, ``runtime_env``, storage path or
tracking store is one clear error with nothing started; it reads the sweep file into its
plan (:class:`~versatil.sweep.plan.Plan`), which every phase after it reads instead of the
file. :func:`open_tracking` then opens the sweep's MLflow run in a thread, overlapping
Ray's start.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from pathlib import Path
from typing import Any, TextIO

import yaml

from versatil.sweep.config.checks import check_storage, check_task
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.prepared import Prepared
from versatil.sweep.engine.resume import choose_experiment
from versatil.sweep.engine.shipping import plan_for
from versatil.sweep.plan import Plan
from versatil.sweep.storage import Storage, embedded_store_directory
from versatil.sweep.tracking import (
    PARENT_FILE,
    TrackingContext,
    check_server,
    default_tracking_uri,
    open_sweep_run,
    tracking_store,
)
from versatil.sweep.vocab.names import PLAN_FILE, SWEEP_FILE

__all__ = ["Prepared", "embedded_store", "open_tracking", "plan_json", "prepare", "say_changes"]


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
    name, resume = choose_experiment(config.name, storage, resume, auto_resume, stream)
    experiment_dir = storage.pull(name)  # the records a resumed run goes on from
    check_server(uri, source=source)
    plan = make_plan(config, tracking_uri=uri)
    sweep_yaml = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    if resume:
        say_changes(plan, experiment_dir / PLAN_FILE, stream)
    else:  # what `sync` reads back: the sweep as validated, overrides applied; its plan
        storage.write_text(sweep_yaml, name, SWEEP_FILE)
        storage.write_text(plan_json(plan), name, PLAN_FILE)
    return Prepared(plan, storage, name, resume, experiment_dir, uri, sweep_yaml, shipment)


def plan_json(plan: Plan) -> str:
    """The plan as ``plan.json`` holds it."""
    return json.dumps(plan.as_dict(), indent=2) + "\n"


def say_changes(plan: Plan, earlier: Path, stream: TextIO | None) -> list[str]:
    """Says on ``stream`` what differs between ``plan`` and the plan the resumed run made.

    The resumed run goes on with ``plan``; the trials it finished keep what they ran with.

    Returns:
        One line per changed field (none when the plans agree or the run kept no plan).
    """
    if not earlier.is_file():
        return []
    changes = plan.changes(json.loads(earlier.read_text()))
    if changes and stream is not None:
        print(
            f"resume: the plan differs from the one {earlier.parent.name} started with "
            f"({len(changes)} changes; finished trials keep theirs): " + "; ".join(changes),
            file=stream,
            flush=True,
        )
    return changes


def open_tracking(prepared: Prepared) -> concurrent.futures.Future[TrackingContext]:
    """Opens the sweep's MLflow run in a thread; its future gives the run.

    Opening MLflow (imports, a new store's schema) overlaps starting Ray, Tune and the
    first workers' imports: the driver logs the first result only seconds later.
    """
    storage, plan = prepared.storage, prepared.plan
    objectives = plan.objectives
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow")
    opening = pool.submit(
        _open_sweep_run,
        storage,
        tracking_uri=prepared.tracking_uri,
        experiment=plan.where.experiment,
        experiment_dir=prepared.experiment_dir,
        experiment_uri=storage.display(prepared.name),
        storage_dir=None if storage.remote else Path(plan.where.storage_path),
        sweep_yaml=prepared.sweep_yaml,
        plan_json=plan_json(plan),
        objective=objectives.metric,
        mode=objectives.mode,
        objectives=list(objectives.objectives),
        tolerance=objectives.tolerance,
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
