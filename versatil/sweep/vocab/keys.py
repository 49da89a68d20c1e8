"""The names of a trial's result keys: what the worker reports and the driver reads.

A small module both sides import; it imports nothing heavy. Every numeric key of a result
that is not named here as bookkeeping is a metric, and the driver logs it to MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "BOOKKEEPING",
    "EPOCH",
    "FIT_TIME_S",
    "HARDWARE_CEILING",
    "HARDWARE_NOTES",
    "HPARAMS",
    "NODE_ID",
    "PID",
    "REASON",
    "RESUMED",
    "SEED",
    "STATUS",
    "STEP",
    "STOPS_SWEEP",
    "STOPS_SWEEP_BEFORE",
    "UNREADABLE_SKIPPED",
    "VERSION",
    "WORLD_SIZE",
    "flatten",
    "metric_items",
]

STATUS = "status"
"""A trial's status: running, completed, stopped, diverged, infeasible or failed."""

REASON = "reason"
"""Why a trial was infeasible, failed or stopped."""

EPOCH = "epoch"
"""The epoch a result reports (0-based); the MLflow step of its metrics."""

STEP = "step"
"""The fit's global step (optimizer steps so far) when a result was reported."""

SEED = "seed"
"""The axis that replicates a configuration: the fit's seed (``replicates: K`` adds it).

Trials that differ only in it are one configuration's replicates.
"""

HPARAMS = "hparams"
"""The module's hyperparameters, flattened to strings; in a fit's first result only."""

HARDWARE_NOTES = "hardware_notes"
"""Why a hardware metric (FLOPs, ceiling, MFU, energy) is absent: ``{"flops": why, ...}``."""

HARDWARE_CEILING = "hardware_ceiling"
"""The device's measured matmul ceilings the trial's ``ceiling_fraction`` divides by."""

STOPS_SWEEP = "stops_sweep"
"""True in the result of a trial whose problem every trial meets the same way (the module
never logged the objective; an endless epoch with no step budget): the sweep stops."""

STOPS_SWEEP_BEFORE = "objective_missing"
""":data:`STOPS_SWEEP`'s key in results written before it covered more than the objective."""

RESUMED = "resumed"
"""True in the results of a trial restored from a checkpoint (a retry, a resume, an exploit)."""

WORLD_SIZE = "world_size"
"""How many processes trained the fit: 1, or a data-parallel trial's workers."""

NODE_ID = "node_id"
"""The Ray node the result's worker ran on."""

PID = "pid"
"""The worker's process id."""

FIT_TIME_S = "fit_time_s"
"""Seconds inside the trial's fit so far (settings applied, model built, epochs); a metric."""

UNREADABLE_SKIPPED = "checkpoint/unreadable_skipped"
"""How many unreadable newer checkpoints a restored trial passed over; a metric."""

VERSION = "report_version"
"""The version of the result's layout (:mod:`versatil.sweep.vocab.report`); absent: 0."""

# Tune's own keys (``ray.tune.result.AUTO_RESULT_KEYS`` and the rest it adds to a result)
# and versatil's facts about the worker: reported, but not measurements of the training.
BOOKKEEPING = frozenset(
    {
        "training_iteration",
        "time_total_s",
        "time_this_iter_s",
        "time_since_restore",
        "timesteps_total",
        "timesteps_since_restore",
        "iterations_since_restore",
        "episodes_total",
        "timestamp",
        "date",
        "done",
        "trial_id",
        "experiment_tag",
        "node_ip",
        "hostname",
        PID,
        "config",
        "checkpoint_dir_name",
        "should_checkpoint",
        EPOCH,
        STEP,
        STATUS,
        REASON,
        HPARAMS,
        HARDWARE_NOTES,
        HARDWARE_CEILING,
        STOPS_SWEEP,
        STOPS_SWEEP_BEFORE,
        NODE_ID,
        RESUMED,
        WORLD_SIZE,
        VERSION,
    }
)


def metric_items(result: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """The metrics of a result: its numeric, non-bookkeeping keys with finite or NaN values.

    Infinite values are left out: they stand for "no value" (an infeasible trial's
    objective), and a NaN stays, since it records a diverged loss.
    """
    for name, value in result.items():
        if name in BOOKKEEPING or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isinf(value):
            yield name, float(value)


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mappings as dotted keys, every value as text.

    ``{"opt": {"lr": 1}}`` -> ``{"opt.lr": "1"}``; ``None`` becomes ``"none"``.
    """
    flat: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = "none" if value is None else str(value)
    return flat
