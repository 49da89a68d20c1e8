"""Where everything of a sweep is named: its experiment directories, its runs, its artifacts.

One home for names, so the driver, tracking, ``sync``, ``report`` and ``compress`` find
what the others wrote. Nothing here imports torch, Ray or MLflow.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from versatil.sweep.vocab.keys import SEED
from versatil.training.spec import NONE, SETTING_ENUMS

__all__ = [
    "CHECKPOINT_ARTIFACT",
    "COMPUTE_ARTIFACT",
    "CONFIRM_ARTIFACT",
    "INT8_SUFFIX",
    "PLAN_FILE",
    "RACE_ARTIFACT",
    "SWEEP_ENDED",
    "SWEEP_FILE",
    "configuration_name",
    "experiment_dir_name",
    "experiment_names",
    "int8_dir",
    "int8_run_name",
    "run_name",
    "sweep_of",
]

SWEEP_FILE = "sweep.yaml"
"""The sweep as it ran (overrides applied), written into its experiment directory."""

PLAN_FILE = "plan.json"
"""The sweep's plan as it first ran, in its experiment directory and on its parent run."""

SWEEP_ENDED = "sweep_ended.json"
"""Written into the experiment directory once the sweep's end is logged: no longer
interrupted, so ``--auto-resume`` starts a new run rather than resuming it."""

CHECKPOINT_ARTIFACT = "checkpoint"
"""The artifact path of a run's checkpoint directory in MLflow."""

CONFIRM_ARTIFACT = "confirm/rounds.json"
"""The parent run's artifact holding the re-timing's rounds (they decide the verdict)."""

RACE_ARTIFACT = "race/screen.json"
"""The race's screen (its rounds, who is out, the training order): in the experiment
directory, where a resumed race reads it back, and on the parent run."""

COMPUTE_ARTIFACT = "compute.json"
"""The parent run's artifact holding the sweep's device-seconds by phase."""

INT8_SUFFIX = "int8"
"""What names an INT8 copy: the run ``<trial's run>/int8``, the directory ``<name>-int8``."""

MAX_RUN_NAME = 250
"""MLflow's limit on a run name."""

_STAMP = "%Y%m%d-%H%M%S"


def experiment_dir_name(sweep: str, when: float | None = None) -> str:
    """A new invocation's experiment directory: ``<sweep>-<YYYYmmdd-HHMMSS>``."""
    return f"{sweep}-{time.strftime(_STAMP, time.localtime(when))}"


def experiment_names(directories: Iterable[str], sweep: str) -> list[str]:
    """The experiment directories of ``sweep`` among ``directories``' names, oldest first."""
    return sorted(d for d in directories if sweep_of(d) == sweep)


def sweep_of(directory_name: str) -> str | None:
    """The sweep an experiment directory's name belongs to, or ``None`` if it is none's."""
    name, _, stamp = directory_name.rpartition("-")
    name, _, day = name.rpartition("-")
    try:
        time.strptime(f"{day}-{stamp}", _STAMP)
    except ValueError:
        return None
    return name or None


def _number(value: float) -> str:
    """4 significant digits where they say the value exactly, else every digit it needs.

    Grid values read short (``0.003``); a sampled ``0.0037834...`` keeps its digits, so two
    trials of different values never share a run name.
    """
    short = f"{value:.4g}"
    return short if float(short) == value else repr(value)


def run_name(axes: Mapping[str, Any], fallback: str) -> str:
    """What sets a trial apart, for the UI's run list: ``bf16-mixed/default/lr=0.003``.

    The settings axes come first by value (an eager trial's compile mode reads ``eager``),
    then every other axis as ``name=value``.
    """
    parts = []
    for name in SETTING_ENUMS:
        if name in axes:
            value = axes[name]
            if value in (None, NONE):
                value = "eager" if name == "compile_mode" else f"{name}={NONE}"
            parts.append(str(value))
    for name, value in axes.items():
        if name not in SETTING_ENUMS:
            text = _number(value) if isinstance(value, float) else str(value)
            parts.append(f"{name}={text}")
    return "/".join(parts)[:MAX_RUN_NAME] or fallback


def configuration_name(axes: Mapping[str, Any]) -> str:
    """A configuration, whatever its seed: the run name without ``seed=``.

    One configuration's replicates share it (the ``versatil.configuration`` tag), so
    the MLflow UI's "Group by" shows them together.
    """
    return run_name({k: v for k, v in axes.items() if k != SEED}, "default")


def int8_run_name(trial_run_name: str) -> str:
    """The INT8 run of a trial, nested under the trial's run."""
    return f"{trial_run_name}/{INT8_SUFFIX}"


def int8_dir(parent: Path, name: str) -> Path:
    """Where the INT8 copy of checkpoint (or trial) ``name`` is written, under ``parent``."""
    return Path(parent) / f"{name}-{INT8_SUFFIX}"
