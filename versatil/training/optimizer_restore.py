"""A fit's optimizer hyperparameters kept through a restore (a PBT exploit), and reported.

Resuming a fit from a checkpoint brings back the param groups' hyperparameters as they were
when it was written; :class:`OptimizerHparams` puts this run's configured values back (the
mutated params of a PBT exploit) and reports the values each epoch starts with.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import lightning as L
import torch
from typing_extensions import override

__all__ = ["OptimizerHparams"]


class OptimizerHparams(L.Callback):
    """Keeps the configured optimizer hyperparameters through a restore; reports them.

    Resuming a fit from a checkpoint restores the optimizers' state and, with it, the
    hyperparameters their param groups held when the checkpoint was written. For each key
    in ``keys`` (``lr``, ``weight_decay``, ``momentum``, ``eps``, ...) the value this run's
    ``configure_optimizers`` set wins instead, group by group: it is read after the
    optimizers are built and before Lightning restores them (``on_fit_start``), and set
    again once they are restored (``on_train_start``). So a PBT exploit, which restores
    another trial's checkpoint under mutated params, trains with the mutated values, and
    per-group factors the task applies (a smaller lr for a backbone, say) are kept.

    With an lr scheduler the configured ``lr`` is the schedule's base: the restored lr is
    scaled by configured / restored base lr, and the schedulers' ``base_lrs`` are set, so
    the schedule goes on from where it was. (Schedulers that keep bounds of their own,
    such as OneCycleLR's ``max_lr``, keep those.)

    :meth:`epoch_metrics` gives ``optimizer/<key>`` for ``lr`` and each of ``keys``: the
    values the epoch started with, in the first param group of the first optimizer.
    """

    def __init__(self, keys: Collection[str] = ()) -> None:
        """Sets up the callback.

        Args:
            keys: Param-group keys whose configured values win over restored ones.
        """
        self.keys = tuple(dict.fromkeys(keys))
        self._configured: list[list[dict[str, Any]]] = []
        self._epoch_values: dict[str, float] = {}

    @override
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        keys = (*self.keys, "initial_lr") if "lr" in self.keys else self.keys
        self._configured = [
            [{k: _copy(group[k]) for k in keys if k in group} for group in optimizer.param_groups]
            for optimizer in trainer.optimizers
        ]

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.ckpt_path is None or not self.keys:
            return  # nothing was restored: the optimizers hold their configured values
        for optimizer, configured in zip(trainer.optimizers, self._configured, strict=False):
            for index, (group, values) in enumerate(
                zip(optimizer.param_groups, configured, strict=False)
            ):
                for key, value in values.items():
                    if key == "initial_lr":
                        continue
                    if key == "lr" and "initial_lr" in values and "initial_lr" in group:
                        value = _scaled_lr(group, values["initial_lr"])
                        self._set_base_lr(trainer, optimizer, index, values["initial_lr"])
                    _set(group, key, value)

    @staticmethod
    def _set_base_lr(trainer: L.Trainer, optimizer: Any, index: int, base: Any) -> None:
        _set(optimizer.param_groups[index], "initial_lr", base)
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            if getattr(scheduler, "optimizer", None) is optimizer and hasattr(
                scheduler, "base_lrs"
            ):
                scheduler.base_lrs[index] = _number(base)

    @override
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Read now: epoch-interval lr schedulers step before the epoch's end hooks run.
        self._epoch_values = {}
        if not trainer.optimizers or not trainer.optimizers[0].param_groups:
            return
        group = trainer.optimizers[0].param_groups[0]
        for key in dict.fromkeys(("lr", *self.keys)):
            value = _number(group.get(key))
            if value is not None:
                self._epoch_values[f"optimizer/{key}"] = value

    def epoch_metrics(self) -> dict[str, float]:
        """``optimizer/<key>`` as the epoch started, from the first optimizer's first group."""
        return dict(self._epoch_values)


def _copy(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _number(value: Any) -> float | None:
    """A param-group value as a float, or ``None`` when it is not one number (betas)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _set(group: dict[str, Any], key: str, value: Any) -> None:
    # A tensor lr (capturable or fused optimizers) is updated in place, keeping its device.
    if isinstance(group.get(key), torch.Tensor):
        group[key].fill_(_number(value))
    else:
        group[key] = _copy(value)


def _scaled_lr(group: dict[str, Any], configured_base: Any) -> float | None:
    """The restored lr, moved onto the configured base lr of its schedule."""
    restored_base = _number(group["initial_lr"])
    lr = _number(group["lr"])
    base = _number(configured_base)
    if not restored_base or lr is None or base is None:
        return base if base is not None else lr
    return lr * base / restored_base
