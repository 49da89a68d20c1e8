"""One training run: settings -> feasibility -> apply -> Lightning fit -> checkpoint dir."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L

from versatil.training.checkpoint import CheckpointDirWriter
from versatil.training.config import TrainConfig
from versatil.training.metrics import ThroughputMonitor
from versatil.training.settings import DeviceInfo, apply_settings, reset_process_state
from versatil.training.tasks import build_task

__all__ = ["EpochEnd", "InfeasibleError", "TrainResult", "train"]

# Noise Lightning prints for every small in-memory run; none of it is actionable here.
_QUIET = (
    r".*does not have many workers.*",
    r".*isinstance\(treespec, LeafSpec\).*",
    r".*The number of training batches .* is smaller than the logging interval.*",
)

EpochEnd = Callable[[L.Trainer, dict[str, float]], None]
"""Called after every epoch (validation included) with the epoch's metrics."""


class InfeasibleError(RuntimeError):
    """The settings cannot run on this device; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass
class TrainResult:
    """What a run produced.

    Attributes:
        status: ``completed``, or ``diverged`` when the training loss stopped being finite.
        metrics: The last epoch's metrics (objective, losses, throughput).
        history: Every epoch's metrics, in order.
        checkpoint_dir: The checkpoint directory (``last.ckpt``, ``config.yaml``).
        module: The trained LightningModule.
        datamodule: The task's LightningDataModule.
    """

    status: str
    metrics: dict[str, float]
    history: list[dict[str, float]]
    checkpoint_dir: Path
    module: L.LightningModule
    datamodule: L.LightningDataModule


class _EpochEndHook(L.Callback):
    """Collects each epoch's metrics, stops on divergence, then calls the user's hook."""

    def __init__(self, monitor: ThroughputMonitor, hook: EpochEnd | None) -> None:
        self.monitor = monitor
        self.hook = hook
        self.history: list[dict[str, float]] = []
        self.diverged = False

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        metrics.update(self.monitor.epoch_metrics)
        metrics["epoch"] = trainer.current_epoch
        self.history.append(metrics)
        loss = metrics.get("train_loss")
        if loss is not None and not math.isfinite(loss):
            self.diverged = True
            trainer.should_stop = True
        if self.hook is not None:
            self.hook(trainer, metrics)


def build_trainer(
    config: TrainConfig, callbacks: Sequence[L.Callback], **overrides: Any
) -> L.Trainer:
    """A Lightning Trainer for ``config``; ``overrides`` go to ``L.Trainer``."""
    kwargs: dict[str, Any] = dict(
        precision=config.precision.value,
        max_epochs=config.max_epochs,
        accelerator=config.accelerator,
        devices=config.devices,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
    )
    kwargs.update(overrides)
    return L.Trainer(**kwargs)


def train(
    config: TrainConfig,
    checkpoint_dir: Path,
    *,
    on_epoch_end: EpochEnd | None = None,
    ckpt_path: Path | None = None,
    device: DeviceInfo | None = None,
    warmup_steps: int = 2,
    **trainer_overrides: Any,
) -> TrainResult:
    """Trains ``config`` and writes its checkpoint directory after every epoch.

    Args:
        config: The resolved run configuration.
        checkpoint_dir: Where ``last.ckpt`` and ``config.yaml`` go.
        on_epoch_end: Called after each epoch, once the checkpoint directory is written.
        ckpt_path: A ``last.ckpt`` to resume from.
        device: The worker's device; detected when omitted.
        warmup_steps: Training batches at the start of the fit left out of the
            throughput (see :class:`ThroughputMonitor`).
        **trainer_overrides: Extra ``L.Trainer`` arguments (strategy, plugins, ...).

    Raises:
        InfeasibleError: when the settings cannot run on the device.
    """
    settings = config.settings
    device = device or DeviceInfo.detect(config.accelerator)
    reason = settings.infeasibility_reason(device)
    if reason is not None:
        raise InfeasibleError(reason)
    reset_process_state(config.seed)
    built: dict[str, Any] = {}

    def build_model() -> L.LightningModule:
        built["model"], built["datamodule"] = build_task(config.task, config.params)
        return built["model"]

    model = apply_settings(settings, build_model)
    monitor = ThroughputMonitor(
        compiled=settings.compile_mode is not None, warmup_steps=warmup_steps
    )
    # Order matters: measure, write the checkpoint, then report it.
    epoch_end = _EpochEndHook(monitor, on_epoch_end)
    callbacks = [monitor, CheckpointDirWriter(checkpoint_dir, config), epoch_end]
    trainer = build_trainer(config, callbacks, **trainer_overrides)
    with warnings.catch_warnings():
        for pattern in _QUIET:
            warnings.filterwarnings("ignore", message=pattern)
        trainer.fit(model, datamodule=built["datamodule"], ckpt_path=ckpt_path)
    history = epoch_end.history
    return TrainResult(
        status="diverged" if epoch_end.diverged else "completed",
        metrics=history[-1] if history else {},
        history=history,
        checkpoint_dir=Path(checkpoint_dir),
        module=model,
        datamodule=built["datamodule"],
    )
