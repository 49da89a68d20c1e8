"""The trainable: one Ray Tune trial is settings -> feasibility -> apply -> fit -> report.

Torch and Lightning are imported inside the trial, not at module import, so the driver
stays light; with actor reuse each worker process pays those imports once.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.config import ENUM_AXES, NONE, SweepConfig
from versatil.sweep.result_keys import HPARAMS, OBJECTIVE_MISSING, REASON, STATUS, flatten
from versatil.training.config import TrainConfig

__all__ = ["STATUS", "missing_objective", "run_trial", "train_config_for", "worst_value"]


def worst_value(mode: str) -> float:
    """The objective reported by trials that produced none (infeasible ones)."""
    return math.inf if mode == "min" else -math.inf


def train_config_for(axes: dict[str, Any], sweep: SweepConfig) -> TrainConfig:
    """The run configuration of one trial: the sweep's fixed parts plus the trial's axes."""
    settings = {name: axes[name] for name in ENUM_AXES if name in axes}
    for name in ("compile_mode", "matmul_precision"):
        if settings.get(name) == NONE:
            settings[name] = None
    params = {**sweep.task.params, **{k: v for k, v in axes.items() if k not in ENUM_AXES}}
    return TrainConfig.from_mapping(
        {
            "task": sweep.task.name,
            "params": params,
            "max_epochs": sweep.trainer.max_epochs,
            "accelerator": sweep.trainer.accelerator,
            "seed": sweep.trainer.seed,
            **settings,
        }
    )


def _restore(trial_dir: Path) -> Path | None:
    """Copies the checkpoint Tune restores this trial from (if any) into the trial dir."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    restored = trial_dir / "restored"
    shutil.rmtree(restored, ignore_errors=True)
    with checkpoint.as_directory() as directory:
        shutil.copytree(directory, restored)
    return restored / "last.ckpt"


def _process_facts() -> dict[str, Any]:
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
        **_process_facts(),
        STATUS: status,
        "resumed": resumed,
        "world_size": trainer.world_size,
        # Seconds inside this trial's fit so far (settings applied, model built, epochs).
        "fit_time_s": time.perf_counter() - fit_start,
    }
    if not resumed and trainer.current_epoch == 0:
        # The module's own hyperparameters (save_hyperparameters()), once per trial.
        result[HPARAMS] = flatten(dict(trainer.lightning_module.hparams))
    return result


def missing_objective(
    sweep: SweepConfig, metrics: dict[str, float], logged: Any
) -> dict[str, Any] | None:
    """The result that fails a trial whose module did not log the objective, else ``None``.

    The objective can only be checked once a fit has run an epoch; the sweep's driver
    stops the whole sweep on this result, since every other trial would fail the same way.

    Args:
        sweep: The sweep (its objective).
        metrics: The epoch's metrics, versatil's own included.
        logged: The names the module logged (the trainer's ``callback_metrics``).
    """
    metric = sweep.objective.metric
    if metric in metrics:
        return None
    names = sorted(logged)
    reason = (
        f"objective.metric: {metric!r} was not logged by the module in epoch "
        f"{int(metrics.get('epoch', 0))}; it logged {', '.join(names) or 'nothing'}; set "
        "objective.metric to one of those, or log it with self.log() in the LightningModule"
    )
    return {**end_result(sweep, TrialStatus.FAILED, reason), OBJECTIVE_MISSING: True}


def end_result(sweep: SweepConfig, status: TrialStatus, reason: str) -> dict[str, Any]:
    """The one result of a trial that could not train: worst objective, status, reason."""
    return {
        sweep.objective.metric: worst_value(sweep.objective.mode),
        STATUS: status,
        REASON: reason,
    }


def run_trial(axes: dict[str, Any], sweep: SweepConfig) -> None:
    """Runs one trial inside a Tune worker; reports every epoch with its checkpoint.

    Infeasible settings end the trial with one result whose status is ``infeasible`` and
    whose reason says why; the sweep goes on. With ``resources.workers_per_trial > 1``
    the fit runs data-parallel across Ray Train workers instead. The driver logs every
    result to MLflow; the worker never talks to the tracking server.
    """
    from ray import tune

    from versatil.cli_common import quiet_libraries
    from versatil.training.fit import InfeasibleError, train

    quiet_libraries()
    try:
        config = train_config_for(axes, sweep)
    except ConfigError as error:
        tune.report({**end_result(sweep, TrialStatus.FAILED, str(error)), **_process_facts()})
        return
    if sweep.resources.workers_per_trial > 1:
        from versatil.sweep.distributed import run_distributed_trial

        run_distributed_trial(config, sweep)
        return
    trial_dir = Path(tune.get_context().get_trial_dir())
    checkpoint_dir = trial_dir / "checkpoint"
    ckpt_path = _restore(trial_dir)
    resumed = ckpt_path is not None  # restored by Tune: a retry, a resume or a PBT exploit
    fit_start = time.perf_counter()

    def report(trainer: Any, metrics: dict[str, float]) -> None:
        failed = missing_objective(sweep, metrics, trainer.callback_metrics)
        if failed is not None:
            trainer.should_stop = True
            tune.report({**failed, **_process_facts()})
            return
        result = epoch_result(trainer, metrics, fit_start, resumed)
        tune.report(result, checkpoint=tune.Checkpoint.from_directory(checkpoint_dir))

    # The params PBT mutates: after an exploit, the optimizer takes the values the task
    # configures from them instead of those restored with the source's checkpoint.
    mutated = sweep.scheduler.hyperparam_mutations if sweep.scheduler.type == "pbt" else {}
    try:
        train(
            config,
            checkpoint_dir,
            on_epoch_end=report,
            ckpt_path=ckpt_path,
            optimizer_keys=tuple(mutated),
        )
    except ConfigError as error:  # bad task params: the message names them
        tune.report({**end_result(sweep, TrialStatus.FAILED, str(error)), **_process_facts()})
    except InfeasibleError as error:
        tune.report({**end_result(sweep, TrialStatus.INFEASIBLE, error.reason), **_process_facts()})
