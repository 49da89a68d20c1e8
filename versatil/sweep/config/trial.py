"""A trial's resolved run configuration: what the driver and the workers both need.

The driver (tracking, dry run) and the workers (the trainable) import this small module,
so neither imports the other's.
"""

from __future__ import annotations

from typing import Any

from versatil.sweep.config.axes import ENUM_AXES
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.keys import SEED
from versatil.training.config import TrainConfig
from versatil.training.hardware.dtypes import compute_dtype
from versatil.training.spec import NONE, DeviceInfo, TrialSettings

__all__ = ["compute_dtypes", "train_config_for", "worst_value"]


def worst_value(mode: str) -> float:
    """The objective reported by trials that produced none (infeasible ones)."""
    return Direction(mode).worst


def train_config_for(axes: dict[str, Any], sweep: SweepConfig) -> TrainConfig:
    """The run configuration of one trial: the sweep's fixed parts plus the trial's axes.

    A ``seed`` axis (a replicate's) is the fit's seed, not a task param.
    """
    settings = {name: axes[name] for name in ENUM_AXES if name in axes}
    for name in ("compile_mode", "matmul_precision"):
        if settings.get(name) == NONE:
            settings[name] = None
    params = {
        **sweep.task.params,
        **{k: v for k, v in axes.items() if k not in ENUM_AXES and k != SEED},
    }
    seed = axes.get(SEED)
    return TrainConfig.from_mapping(
        {
            "task": sweep.task.name,
            "params": params,
            "max_epochs": sweep.trainer.max_epochs,
            "accelerator": sweep.trainer.accelerator,
            "seed": sweep.trainer.seed if seed is None else int(seed),
            **settings,
        }
    )


def compute_dtypes(sweep: SweepConfig, device: DeviceInfo) -> list[str]:
    """The compute dtypes of every setting of the sweep that ``device`` can run.

    A trial measures the device's ceiling for all of them at once, while the trials that
    start beside it wait for the measurement instead of timing each other's load.
    """
    default = TrialSettings()
    precisions = sweep.space.get("precision", [default.precision.value])
    matmuls = sweep.space.get("matmul_precision", [NONE])
    dtypes: list[str] = []
    for precision in precisions:
        for matmul in matmuls:
            config = {"precision": precision, "matmul_precision": matmul}
            settings = TrialSettings.from_config(config)
            dtype = compute_dtype(settings)
            if dtype and dtype not in dtypes and settings.infeasibility_reason(device) is None:
                dtypes.append(dtype)
    return dtypes
