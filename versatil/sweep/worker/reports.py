"""The results a trial reports: after each epoch, and when it cannot train.

Used by the single-worker trainable and by the data-parallel workers alike.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.trial import worst_value
from versatil.sweep.vocab.keys import (
    HARDWARE_CEILING,
    HARDWARE_NOTES,
    HPARAMS,
    OBJECTIVE_MISSING,
    REASON,
    STATUS,
    flatten,
)

__all__ = [
    "end_result",
    "epoch_result",
    "missing_objective",
    "out_of_memory_reason",
    "process_facts",
]


def process_facts() -> dict[str, Any]:
    """Which worker ran the epoch, and the process-wide state it trained under."""
    import ray
    import torch

    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "in_effect/matmul_precision": torch.get_float32_matmul_precision(),
        "in_effect/default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
    }


def epoch_result(
    trainer: Any, metrics: dict[str, float], fit_start: float, resumed: bool
) -> dict[str, Any]:
    """The result a trial reports after an epoch: metrics, status and worker facts."""
    loss = metrics.get("train_loss", 0.0)
    if not math.isfinite(loss):
        status = TrialStatus.DIVERGED
    elif trainer.current_epoch + 1 >= trainer.max_epochs:
        status = TrialStatus.COMPLETED
    else:
        status = TrialStatus.RUNNING
    result = {
        **metrics,
        **process_facts(),
        STATUS: status,
        "resumed": resumed,
        "world_size": trainer.world_size,
        # Seconds inside this trial's fit so far (settings applied, model built, epochs).
        "fit_time_s": time.perf_counter() - fit_start,
    }
    if not resumed and trainer.current_epoch == 0:
        # The module's own hyperparameters (save_hyperparameters()), once per trial.
        result[HPARAMS] = flatten(dict(trainer.lightning_module.hparams))
    return {**result, **hardware_facts(trainer)}


def hardware_facts(trainer: Any) -> dict[str, Any]:
    """The fit's ceilings, and why a hardware metric is absent; sent with every epoch.

    The ceilings are what ``ceiling_fraction`` divides by; the notes say why FLOPs, the
    ceiling, MFU or energy is missing.
    """
    from versatil.training.hardware.utilization import utilization_of

    monitor = utilization_of(trainer)
    if monitor is None:
        return {}
    facts: dict[str, Any] = {}
    if monitor.ceiling is not None:
        facts[HARDWARE_CEILING] = monitor.ceiling.as_dict()
    if monitor.notes:
        facts[HARDWARE_NOTES] = dict(monitor.notes)
    return facts


def missing_objective(
    sweep: SweepConfig, metrics: dict[str, float], logged: Any
) -> dict[str, Any] | None:
    """The result that fails a trial whose module did not log an objective, else ``None``.

    The objectives can only be checked once a fit has run an epoch; the sweep's driver
    stops the whole sweep on this result, since every other trial would fail the same way.

    Args:
        sweep: The sweep (its objectives).
        metrics: The epoch's metrics, versatil's own included.
        logged: The names the module logged (the trainer's ``callback_metrics``).
    """
    missing = [m for m, _ in sweep.objective.objectives if m not in metrics]
    if not missing:
        return None
    field = "objective.metrics" if sweep.objective.metrics else "objective.metric"
    names = sorted(logged)
    reason = (
        f"{field}: {', '.join(repr(m) for m in missing)} was not logged by the module in epoch "
        f"{int(metrics.get('epoch', 0))}; it logged {', '.join(names) or 'nothing'}; set "
        f"{field} to one of those, or log it with self.log() in the LightningModule"
    )
    return {**end_result(sweep, TrialStatus.FAILED, reason), OBJECTIVE_MISSING: True}


def end_result(sweep: SweepConfig, status: TrialStatus, reason: str) -> dict[str, Any]:
    """The one result of a trial that could not train: worst objectives, status, reason."""
    return {
        **{metric: worst_value(mode) for metric, mode in sweep.objective.objectives},
        STATUS: status,
        REASON: reason,
    }


_OOM_MESSAGES = ("can't allocate memory", "out of memory")


def out_of_memory_reason(error: BaseException) -> str | None:
    """Why a fit ran out of memory, or ``None`` when ``error`` is something else.

    CUDA raises ``torch.OutOfMemoryError``; the CPU allocator a ``RuntimeError`` saying it
    "can't allocate memory"; Python a ``MemoryError``.
    """
    text = str(error).strip()
    oom = isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
    if not oom and not any(m in text.lower() for m in _OOM_MESSAGES):
        return None
    # Keep the allocator's sentence, not the C++ source location before it.
    detail = text.splitlines()[0] if text else type(error).__name__
    if "DefaultCPUAllocator:" in detail:
        detail = detail[detail.index("DefaultCPUAllocator:") :]
    return (
        f"out of memory: {detail[:300]}; a smaller batch size or model, a lower precision, "
        "or more memory per trial (resources) would fit"
    )
