"""The results a trial reports: after each epoch, and when it cannot train.

Used by the single-worker trainable and by the data-parallel workers alike.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.plan import TrialPlan
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.keys import EPOCH, flatten
from versatil.sweep.vocab.report import TrialReport

__all__ = [
    "end_result",
    "epoch_result",
    "fit_ends",
    "hardware_facts",
    "missing_objective",
    "missing_objective_report",
    "out_of_memory_reason",
    "with_process_facts",
]


def with_process_facts(report: TrialReport) -> TrialReport:
    """``report`` with the worker that ran it, and the process-wide state it trained under."""
    import ray
    import torch

    return dataclasses.replace(
        report,
        node_id=ray.get_runtime_context().get_node_id(),
        pid=os.getpid(),
        facts={
            **report.facts,
            "in_effect/matmul_precision": torch.get_float32_matmul_precision(),
            "in_effect/default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        },
    )


def epoch_result(
    trainer: Any, metrics: dict[str, float], fit_start: float, resumed: bool
) -> TrialReport:
    """The result a trial reports after an epoch: metrics, status and worker facts."""
    loss = metrics.get("train_loss", 0.0)
    if not math.isfinite(loss):
        status = TrialStatus.DIVERGED
    elif fit_ends(trainer):
        status = TrialStatus.COMPLETED
    else:
        status = TrialStatus.RUNNING
    report = TrialReport(
        status=status,
        epoch=int(metrics[EPOCH]) if EPOCH in metrics else trainer.current_epoch,
        step=trainer.global_step,
        resumed=resumed,
        world_size=trainer.world_size,
        # Seconds inside this trial's fit so far (settings applied, model built, epochs).
        fit_time_s=time.perf_counter() - fit_start,
        # The module's own hyperparameters (save_hyperparameters()), once per trial.
        hparams=(
            flatten(dict(trainer.lightning_module.hparams))
            if not resumed and trainer.current_epoch == 0
            else None
        ),
        metrics={k: v for k, v in metrics.items() if k != EPOCH},
    )
    return hardware_facts(trainer, with_process_facts(report))


def fit_ends(trainer: Any) -> bool:
    """Whether the fit's budget is spent after this epoch.

    The budget is Lightning's: ``max_epochs``, ``max_steps`` or ``max_time`` (its
    ``Timer`` callback), whichever ends first. A fit stopped before it (a user's
    ``EarlyStopping``; a setting found not in effect) has not spent it: its trial reads
    as stopped, or as the failure that stopped it.
    """
    from lightning.pytorch.callbacks import Timer

    epochs = trainer.max_epochs
    if epochs is not None and epochs >= 0 and trainer.current_epoch + 1 >= epochs:
        return True
    if 0 <= trainer.max_steps <= trainer.global_step:
        return True
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    return timer is not None and (timer.time_remaining() or 0) <= 0


def hardware_facts(trainer: Any, report: TrialReport) -> TrialReport:
    """``report`` with the fit's ceilings, and why a hardware metric is absent.

    Sent with every epoch: the ceilings are what ``ceiling_fraction`` divides by; the
    notes say why FLOPs, the ceiling, MFU or energy is missing.
    """
    from versatil.training.hardware.utilization import utilization_of

    monitor = utilization_of(trainer)
    if monitor is None:
        return report
    return dataclasses.replace(
        report,
        hardware_ceiling=monitor.ceiling.as_dict() if monitor.ceiling is not None else None,
        hardware_notes=dict(monitor.notes) if monitor.notes else None,
    )


def missing_objective_report(
    plan: TrialPlan, metrics: dict[str, float], logged: Any
) -> TrialReport | None:
    """The result that fails a trial whose module did not log an objective, else ``None``.

    The objectives can only be checked once a fit has run an epoch; the sweep's driver
    stops the whole sweep on this result, since every other trial would fail the same way.

    Args:
        plan: The trial's plan (its objectives).
        metrics: The epoch's metrics, versatil's own included.
        logged: The names the module logged (the trainer's ``callback_metrics``).
    """
    missing = [m for m, _ in plan.objectives.objectives if m not in metrics]
    if not missing:
        return None
    field = plan.objectives.field
    names = sorted(logged)
    reason = (
        f"{field}: {', '.join(repr(m) for m in missing)} was not logged by the module in epoch "
        f"{int(metrics.get(EPOCH, 0))}; it logged {', '.join(names) or 'nothing'}; set "
        f"{field} to one of those, or log it with self.log() in the LightningModule"
    )
    if "max_steps" in plan.trainer and "val_check_interval" not in plan.trainer:
        reason += (
            "; with trainer.max_steps, Lightning validates only at epoch ends, which a step "
            "budget may stop before: set trainer.val_check_interval to a divisor of "
            "trainer.max_steps"
        )
    report = end_result(plan, TrialStatus.FAILED, reason)
    return dataclasses.replace(report, stops_sweep=True)


def missing_objective(
    plan: TrialPlan, metrics: dict[str, float], logged: Any
) -> dict[str, Any] | None:
    """:func:`missing_objective_report` as the dict Tune receives, else ``None``."""
    report = missing_objective_report(plan, metrics, logged)
    return report.to_dict() if report is not None else None


def end_result(plan: TrialPlan, status: TrialStatus, reason: str) -> TrialReport:
    """The one result of a trial that could not train: worst objectives, status, reason."""
    worst = {metric: Direction(mode).worst for metric, mode in plan.objectives.objectives}
    return TrialReport(status=status, reason=reason, metrics=worst)


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
