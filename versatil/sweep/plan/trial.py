"""What a trial's worker needs of the plan: how its axes become a fit, and where it writes.

The driver hands every worker one :class:`TrialPlan` (Ray pickles it with the trainable);
the worker reads nothing of the sweep file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from versatil.sweep.plan.records import Objectives, Resources
from versatil.sweep.storage import Storage, cache_root, parse_location
from versatil.sweep.vocab.keys import SEED
from versatil.training.config import TrainConfig
from versatil.training.hardware.dtypes import compute_dtype
from versatil.training.spec import NONE, SETTING_ENUMS, DeviceInfo, TrialSettings

__all__ = ["TrialPlan"]


@dataclasses.dataclass(frozen=True)
class TrialPlan:
    """One trial's part of the plan, the same for every trial of the sweep.

    Attributes:
        task: The task (a built-in name or ``package.module:factory``).
        params: The task's fixed params (a trial's axes add to them).
        max_epochs: The epochs of each trial; ``None`` when a step or time budget alone
            bounds it.
        trainer: The Lightning Trainer options every trial passes.
        seed: The fit's seed when the trial's axes hold none.
        resources: What a trial holds, and its accelerator.
        objectives: The metrics each epoch must log.
        storage_path: The storage path as every process reads it: an absolute
            directory, or an object-storage URI.
        on_unreadable_checkpoint: ``previous``, ``restart`` or ``fail``.
        mutated: The params PBT mutates (none without PBT).
        compile_cache: Whether compiled trials share their graphs on the storage path.
        precisions: The space's precisions (the default's when it lists none).
        matmuls: The space's matmul precisions (``none`` when it lists none).
    """

    task: str
    params: Mapping[str, Any]
    max_epochs: int | None
    trainer: Mapping[str, Any]
    seed: int
    resources: Resources
    objectives: Objectives
    storage_path: str
    on_unreadable_checkpoint: str = "previous"
    mutated: tuple[str, ...] = ()
    compile_cache: bool = True
    precisions: tuple[str, ...] = (TrialSettings().precision.value,)
    matmuls: tuple[str, ...] = (NONE,)

    @property
    def accelerator(self) -> str:
        """The trials' ``trainer.accelerator``."""
        return self.resources.accelerator

    def train_config(self, axes: Mapping[str, Any]) -> TrainConfig:
        """The run configuration of a trial: the fixed parts plus the trial's axes.

        A ``seed`` axis (a replicate's) is the fit's seed, not a task param.
        """
        settings = {name: axes[name] for name in SETTING_ENUMS if name in axes}
        for name in ("compile_mode", "matmul_precision"):
            if settings.get(name) == NONE:
                settings[name] = None
        params = {
            **self.params,
            **{k: v for k, v in axes.items() if k not in SETTING_ENUMS and k != SEED},
        }
        seed = axes.get(SEED)
        return TrainConfig.from_mapping(
            {
                "task": self.task,
                "params": params,
                "max_epochs": self.max_epochs,
                "trainer": dict(self.trainer),
                "accelerator": self.accelerator,
                "seed": self.seed if seed is None else int(seed),
                **settings,
            }
        )

    def compute_dtypes(self, device: DeviceInfo) -> list[str]:
        """The compute dtypes of every setting of the sweep that ``device`` can run.

        A trial measures the device's ceiling for all of them at once, while the trials
        that start beside it wait for the measurement instead of timing each other's load.
        """
        dtypes: list[str] = []
        for precision in self.precisions:
            for matmul in self.matmuls:
                config = {"precision": precision, "matmul_precision": matmul}
                settings = TrialSettings.from_config(config)
                dtype = compute_dtype(settings)
                if dtype and dtype not in dtypes and settings.infeasibility_reason(device) is None:
                    dtypes.append(dtype)
        return dtypes

    def storage(self) -> Storage:
        """The storage path as files versatil reads and writes."""
        return Storage(parse_location("storage_path", self.storage_path))

    def _shared_or_per_node(self, name: str) -> Path:
        """``name`` under the storage path, or in this node's cache on object storage."""
        location = parse_location("storage_path", self.storage_path)
        if location.remote:
            return cache_root() / name.lstrip(".")
        return location.directory() / name

    def compile_cache_dir(self) -> Path | None:
        """Where compiled trials share their graphs (each node its own on object storage).

        ``None`` with ``trainer.compile_cache: false``: every trial compiles.
        """
        return self._shared_or_per_node(".compile_cache") if self.compile_cache else None

    def ceiling_dir(self) -> Path:
        """Where the devices' measured matmul ceilings are cached (per node on object storage)."""
        return self._shared_or_per_node(".ceilings")
