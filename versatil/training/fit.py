"""One training run: settings -> feasibility -> apply -> Lightning fit -> checkpoint dir."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import math
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import lightning as L

from versatil.status import TrialStatus
from versatil.training.apply import (
    apply_settings,
    compile_targets,
    reset_process_state,
    trainer_precision,
)
from versatil.training.budget import EndlessEpochCheck, EveryTrialError
from versatil.training.checkpoint import CheckpointDirWriter
from versatil.training.compile_cache import CompileCache, CompileCacheSession
from versatil.training.compile_health import COMPILE_LOG, compile_logs_to
from versatil.training.config import TrainConfig
from versatil.training.hardware.ceiling import CeilingCache
from versatil.training.hardware.flops import StepFlops
from versatil.training.hardware.utilization import UtilizationMonitor
from versatil.training.in_effect import SettingsNotInEffectError, SettingsProbe
from versatil.training.metric_names import SAMPLES_PER_SEC
from versatil.training.metrics import ThroughputMonitor
from versatil.training.optimizer_restore import OptimizerHparams
from versatil.training.sharing import DeviceShareMonitor, Tenants
from versatil.training.spec import DeviceInfo
from versatil.training.tasks import build_task
from versatil.training.trainer_options import QUIET_DEFAULTS, instantiate_callbacks

__all__ = ["EpochEnd", "InfeasibleError", "OptimizerHparams", "TrainResult", "train"]

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
        unconfirmed: Settings checks that were not confirmed in the last epoch, though
            nothing contradicted them (see :mod:`versatil.training.in_effect`).
        notes: Why a hardware metric is absent (see :mod:`versatil.training.hardware`).
    """

    status: str
    metrics: dict[str, float]
    history: list[dict[str, float]]
    checkpoint_dir: Path
    module: L.LightningModule
    datamodule: L.LightningDataModule
    unconfirmed: list[str] = dataclasses.field(default_factory=list)
    notes: dict[str, str] = dataclasses.field(default_factory=dict)


class _EpochEndHook(L.Callback):
    """Per-epoch hook: collects the epoch's metrics, stops a bad run, then calls the user's hook.

    A run is stopped when it diverges or when its settings are not in effect.
    """

    def __init__(
        self,
        monitor: ThroughputMonitor,
        optimizer: OptimizerHparams,
        probe: SettingsProbe,
        hook: EpochEnd | None,
        utilization: UtilizationMonitor,
        cache: CompileCacheSession | None = None,
        sharing: DeviceShareMonitor | None = None,
    ) -> None:
        self.utilization = utilization
        self.cache = cache
        self.sharing = sharing
        self.monitor = monitor
        self.optimizer = optimizer
        self.probe = probe
        self.hook = hook
        self.history: list[dict[str, float]] = []
        self.diverged = False

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        metrics.update(self.monitor.epoch_metrics)
        metrics.update(self.utilization.epoch_metrics(metrics.get(SAMPLES_PER_SEC)))
        metrics.update(self.optimizer.epoch_metrics())
        metrics.update(self.probe.epoch_metrics)
        if self.cache is not None:
            metrics.update(self.cache.epoch_metrics)
        if self.sharing is not None:
            metrics.update(self.sharing.epoch_metrics)
        if self.probe.fell_back_to_eager:
            metrics.pop("compile_time_s", None)  # nothing was compiled: not a compiled trial
        metrics["epoch"] = trainer.current_epoch
        self.history.append(metrics)
        loss = metrics.get("train_loss")
        if loss is not None and not math.isfinite(loss):
            self.diverged = True
            trainer.should_stop = True
        if self.probe.fatal_problems:
            # The epoch is still reported (its in_effect/* flags say what failed); no
            # further epoch is trained under settings that are not the trial's.
            trainer.should_stop = True
        if self.hook is not None:
            self.hook(trainer, metrics)


def _cache_callback_entry_points() -> None:
    """Makes Lightning look up its callback entry points once per process, not per Trainer.

    Every ``L.Trainer()`` asks ``importlib.metadata`` for the
    ``lightning.pytorch.callbacks_factory`` entry points, which reads every installed
    package's metadata: 7 ms alone and a fifth of a tiny trial's time in a busy worker that
    runs trial after trial. The packages installed do not change under a running process,
    so the lookup is cached; the factories are still called for every Trainer, so each one
    gets new callbacks.
    """
    from lightning.fabric.utilities import registry

    lookup = getattr(registry, "entry_points", None)
    if callable(lookup) and not hasattr(lookup, "cache_info"):
        registry.entry_points = functools.lru_cache(maxsize=None)(lookup)


def build_trainer(
    config: TrainConfig, callbacks: Sequence[L.Callback], **overrides: Any
) -> L.Trainer:
    """A Lightning Trainer for ``config``; ``overrides`` go to ``L.Trainer``.

    The user's Trainer options (``config.trainer``) apply over versatil's quiet defaults;
    their callbacks run before ``callbacks``, so that what they decide (an early stop)
    is seen by versatil's at the same hook.
    """
    _cache_callback_entry_points()
    options = {k: v for k, v in config.trainer.items() if k != "callbacks"}
    kwargs: dict[str, Any] = dict(
        precision=trainer_precision(config.settings),
        # None with a step or time budget: Lightning then bounds the fit by that alone.
        max_epochs=config.max_epochs if config.max_epochs is not None else -1,
        accelerator=config.accelerator,
        devices=config.devices,
        logger=False,
        enable_checkpointing=False,
        **{**QUIET_DEFAULTS, **options},
        callbacks=[*instantiate_callbacks(config.trainer), *callbacks],
    )
    kwargs.update(overrides)
    return L.Trainer(**kwargs)


def _log_header(config: TrainConfig) -> str:
    """The line that opens a fit's records in its compile log: when, the task, the settings."""
    settings = " ".join(f"{k}={v}" for k, v in config.settings.to_config().items())
    when = datetime.datetime.now().isoformat(timespec="seconds")
    return f"--- {when} fit of {config.task}: {settings}"


@contextlib.contextmanager
def _lightning_noise_quiet() -> Iterator[None]:
    """Leaves out the warnings Lightning prints for every small run, while it lasts."""
    with warnings.catch_warnings():
        for pattern in _QUIET:
            warnings.filterwarnings("ignore", message=pattern)
        yield


def _build(
    config: TrainConfig, device: DeviceInfo
) -> tuple[L.LightningModule, L.LightningDataModule]:
    """The task's model, its settings applied, and its datamodule, in a fresh process state.

    Raises:
        InfeasibleError: when the settings cannot run on ``device``.
    """
    reason = config.settings.infeasibility_reason(device)
    if reason is not None:
        raise InfeasibleError(reason)
    reset_process_state(config.seed)
    built: dict[str, Any] = {}

    def build_model() -> L.LightningModule:
        built["model"], built["datamodule"] = build_task(config.task, config.params)
        return built["model"]

    model = apply_settings(config.settings, build_model)
    return model, built["datamodule"]


def _fit(
    trainer: L.Trainer,
    model: L.LightningModule,
    datamodule: L.LightningDataModule,
    ckpt_path: Path | None,
) -> None:
    """``trainer.fit``, with Lightning's refusal of the validation cadence said as ours."""
    try:
        trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
    except ValueError as error:
        if not str(error).startswith("`val_check_interval`"):
            raise
        raise EveryTrialError(
            f"trainer.val_check_interval: {trainer.val_check_interval} is longer than an "
            f"epoch of {trainer.num_training_batches} training batches; set "
            "trainer.check_val_every_n_epoch: null to validate every "
            f"{trainer.val_check_interval} batches across epochs, as Lightning requires"
        ) from None


def train(
    config: TrainConfig,
    checkpoint_dir: Path,
    *,
    on_epoch_end: EpochEnd | None = None,
    ckpt_path: Path | None = None,
    device: DeviceInfo | None = None,
    optimizer_keys: Collection[str] = (),
    warmup_steps: int = 2,
    compile_log: Path | None = None,
    compile_cache: CompileCache | None = None,
    ceilings: CeilingCache | None = None,
    device_tenants: Tenants | None = None,
    **trainer_overrides: Any,
) -> TrainResult:
    """Trains ``config`` and writes its checkpoint directory after every epoch.

    Args:
        config: The resolved run configuration.
        checkpoint_dir: Where ``last.ckpt`` and ``config.yaml`` go.
        on_epoch_end: Called after each epoch, once the checkpoint directory is written.
        ckpt_path: A ``last.ckpt`` to resume from.
        device: The worker's device; detected when omitted.
        optimizer_keys: Param-group keys (``lr``, ``weight_decay``, ...) that keep the
            values ``configure_optimizers`` set from ``config.params`` when the optimizer
            state is restored from ``ckpt_path`` (see :class:`OptimizerHparams`); PBT
            passes the params it mutates.
        warmup_steps: Training batches at the start of the fit left out of the
            throughput (see :class:`ThroughputMonitor`).
        compile_log: Where torch.compile's log records (graph-break warnings, ...) go
            during the fit instead of the console, appended; default ``compile.log`` in
            ``checkpoint_dir``, so it travels with the checkpoint (a data-parallel rank's
            checkpoint directory is a scratch directory; its parent is shared). Created
            only when something is logged.
        compile_cache: A directory shared between trials where a compiled fit loads its
            graphs or publishes them, so each graph compiles once (see
            :class:`CompileCache`); unused for an eager run. ``None`` compiles locally.
        ceilings: Where the device's measured matmul ceilings are cached (measured there
            when missing); ``None`` reports no ``ceiling_fraction``.
        device_tenants: How many fits hold this fit's device now, itself included, sampled
            into ``device_trials_*`` (:class:`DeviceShareMonitor`); ``None``: not sampled.
        **trainer_overrides: Extra ``L.Trainer`` arguments (strategy, plugins, ...).

    Raises:
        InfeasibleError: when the settings cannot run on the device.
        SettingsNotInEffectError: when a setting was observed not in effect during the
            fit (see :mod:`versatil.training.in_effect`); the epoch that found it was
            reported to ``on_epoch_end`` first, with its ``in_effect/*`` flags.
    """
    settings = config.settings
    device = device or DeviceInfo.detect(config.accelerator)
    model, datamodule = _build(config, device)
    monitor = ThroughputMonitor(
        compiled=settings.compile_mode is not None, warmup_steps=warmup_steps
    )
    flops = StepFlops()  # counts the first training batch: the last batch-start hook
    utilization = UtilizationMonitor(settings, ceilings, warmup_steps=warmup_steps, flops=flops)
    hparams = OptimizerHparams(optimizer_keys)
    probe = SettingsProbe(settings, compile_targets(model))
    cache = None
    if compile_cache is not None and settings.compile_mode is not None:
        cache = compile_cache.session(settings, device, model)
    # Order matters: measure and check, publish compiled graphs, write the checkpoint,
    # then report it.
    sharing = DeviceShareMonitor(device_tenants) if device_tenants is not None else None
    epoch_end = _EpochEndHook(monitor, hparams, probe, on_epoch_end, utilization, cache, sharing)
    measured = (sharing, utilization, monitor, hparams, probe, cache)
    callbacks: list[L.Callback] = [c for c in measured if c is not None]
    callbacks += [CheckpointDirWriter(checkpoint_dir, config), flops, epoch_end]
    callbacks.insert(0, EndlessEpochCheck(config.task, config.trainer))
    trainer = build_trainer(config, callbacks, **trainer_overrides)
    log_path = compile_log or Path(checkpoint_dir) / COMPILE_LOG
    with (
        _lightning_noise_quiet(),
        compile_logs_to(log_path, _log_header(config)),
        cache or contextlib.nullcontext(),
    ):
        _fit(trainer, model, datamodule, ckpt_path)
    if probe.fatal_problems:
        raise SettingsNotInEffectError(probe.fatal_problems)
    history = epoch_end.history
    return TrainResult(
        status=TrialStatus.DIVERGED if epoch_end.diverged else TrialStatus.COMPLETED,
        metrics=history[-1] if history else {},
        history=history,
        checkpoint_dir=Path(checkpoint_dir),
        module=model,
        datamodule=datamodule,
        unconfirmed=probe.problems,
        notes=dict(utilization.notes),
    )
