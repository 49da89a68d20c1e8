"""The names of the MLflow tags versatil sets, defined once for every module."""

from __future__ import annotations

__all__ = [
    "AXES",
    "BEST_TRIAL",
    "CONFIGURATION",
    "EXPERIMENT_DIR",
    "INT8_BACKEND",
    "INT8_FALLBACK",
    "INT8_SOURCE",
    "INT8_SWEEP_RUN",
    "INT8_TRIAL",
    "INTERRUPTED",
    "MODE",
    "NOTE_PREFIX",
    "OBJECTIVE",
    "OBJECTIVES",
    "OBJECTIVE_OVER_SEEDS",
    "PARENT",
    "PARETO",
    "PARETO_LEVEL",
    "PARETO_RANK",
    "REASON",
    "REFERENCE",
    "STATUS",
    "SWEEP",
    "TARGET",
    "TARGET_REACHED",
    "TOLERANCE",
    "TRAINED_AXES",
    "TRIAL_ID",
    "TRIAL_NAME",
    "TRUNCATED_PARAMS",
    "VERDICT",
    "VERSION_MODEL_ID",
    "VERSION_OBJECTIVE",
    "VERSION_OBJECTIVE_INTERVAL",
    "VERSION_SETTING",
    "VERSION_SPEEDUP",
    "VERSION_SPEEDUP_INTERVAL",
]

# A sweep's parent run.
SWEEP = "versatil.sweep"
EXPERIMENT_DIR = "versatil.experiment_dir"
"""Tune's experiment directory of the sweep invocation: its results and checkpoints."""
OBJECTIVE = "versatil.objective"
"""The primary objective's metric; every parent run has it (how a report finds parents)."""
MODE = "versatil.mode"
OBJECTIVES = "versatil.objectives"
"""Every objective as JSON ``[[metric, mode], ...]``."""
TOLERANCE = "versatil.tolerance"
TARGET = "versatil.target"
"""The objective each trial's ``time_to_target_s`` is measured to (on the parent and on
each child run of a sweep with a target)."""
TARGET_REACHED = "versatil.target_reached"
"""On a child run of a sweep with a target: ``true`` when the trial reached it (its run has
``time_to_target_s``), ``false`` when it never did."""
INTERRUPTED = "versatil.interrupted"
"""Set when a signal stopped the sweep: ``SIGTERM at 2026-12-07T15:30:21Z`` (the last
stop's; a resume continues the run, and the tag stays as its history)."""
BEST_TRIAL = "versatil.best_trial_id"
VERDICT = "versatil.verdict"
REFERENCE = "versatil.reference"
"""The verdict's reference setting as JSON ``[precision, compile_mode, matmul_precision]``,
so that a report judges the sweep against the same setting."""

# A trial's child run.
PARENT = "mlflow.parentRunId"
TRIAL_ID = "versatil.trial_id"
TRIAL_NAME = "versatil.trial_name"
AXES = "versatil.axes"
"""The names of the sweep's axes, comma-separated: which params the report compares."""
CONFIGURATION = "versatil.configuration"
TRAINED_AXES = "versatil.trained_axes"
"""The axes' values the trial's last epoch trained with, as JSON, on a restored trial's run:
a PBT exploit mutates them, and MLflow params keep the values the run was opened with."""
"""The trial's configuration without its seed: one configuration's replicates share it."""
OBJECTIVE_OVER_SEEDS = "versatil.objective_over_seeds"
"""The configuration's objective over its seeds: ``mean ± half-width (K seeds)``."""
STATUS = "versatil.status"
REASON = "versatil.reason"
TRUNCATED_PARAMS = "versatil.truncated_params"
NOTE_PREFIX = "versatil.note."
"""``versatil.note.<what>``: why a hardware metric (flops, ceiling, mfu, energy) is absent."""
PARETO = "versatil.pareto"
PARETO_RANK = "versatil.pareto_rank"
PARETO_LEVEL = "versatil.pareto_level"

# An INT8 run of `compress`, nested under its trial's run.
INT8_TRIAL = "versatil.int8.trial_id"
"""The trial whose checkpoint was quantized."""
INT8_SWEEP_RUN = "versatil.int8.sweep_run_id"
"""The sweep's parent run: how a report finds the INT8 runs of a sweep."""
INT8_BACKEND = "versatil.int8.backend"
INT8_SOURCE = "versatil.int8.checkpoint_source"
"""Where the checkpoint came from: an MLflow artifact or the storage path."""
INT8_FALLBACK = "versatil.int8.fallback_reason"

# A registered model version of the recommended setting (``mlflow.register``).
VERSION_MODEL_ID = "versatil.model_id"
"""The version's logged model id, by which a model is registered once."""
VERSION_SETTING = "versatil.setting"
"""The recommended setting's label, e.g. ``bf16-mixed + eager``."""
VERSION_SPEEDUP = "versatil.speedup"
"""Its speedup over the reference; ``reference`` or ``unmeasured`` when it has none."""
VERSION_SPEEDUP_INTERVAL = "versatil.speedup_interval"
VERSION_OBJECTIVE = "versatil.objective_value"
"""Its best configuration's objective, the mean over seeds (the metric: ``versatil.objective``)."""
VERSION_OBJECTIVE_INTERVAL = "versatil.objective_interval"
