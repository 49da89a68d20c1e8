"""The trainable: one Ray Tune trial is settings -> feasibility -> apply -> fit -> report.

Torch and Lightning are imported inside the trial, not at module import, so the driver
stays light; with actor reuse each worker process pays those imports once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.trial import train_config_for
from versatil.sweep.worker.reports import (
    end_result,
    epoch_result,
    missing_objective,
    out_of_memory_reason,
    process_facts,
)
from versatil.sweep.worker.restore import Restored

__all__ = ["run_trial"]


def _restore(trial_dir: Path, policy: str) -> Restored:
    """The checkpoint Tune restores this trial from (if any), copied into the trial dir."""
    from ray import tune

    from versatil.sweep.worker.restore import restore_checkpoint

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return Restored(None)
    return restore_checkpoint(Path(checkpoint.path), trial_dir / "restored", policy)


def run_trial(axes: dict[str, Any], sweep: SweepConfig, compile_cache: str | None = None) -> None:
    """Runs one trial inside a Tune worker; reports every epoch with its checkpoint.

    Infeasible settings end the trial with one result whose status is ``infeasible`` and
    whose reason says why; the sweep goes on. With ``resources.workers_per_trial > 1``
    the fit runs data-parallel across Ray Train workers instead. The driver logs every
    result to MLflow; the worker never talks to the tracking server.

    Args:
        axes: The trial's point in the sweep's space.
        sweep: The sweep.
        compile_cache: The directory where compiled trials share their compiled graphs
            (see :mod:`versatil.training.compile_cache`); ``None`` compiles every trial.
    """
    from ray import tune

    from versatil.cli_common import quiet_libraries
    from versatil.training.compile_cache import CompileCache
    from versatil.training.fit import InfeasibleError, train
    from versatil.training.in_effect import SettingsNotInEffectError

    quiet_libraries()
    try:
        config = train_config_for(axes, sweep)
    except ConfigError as error:
        tune.report({**end_result(sweep, TrialStatus.FAILED, str(error)), **process_facts()})
        return
    if sweep.resources.workers_per_trial > 1:
        from versatil.sweep.worker.distributed import run_distributed_trial

        run_distributed_trial(config, sweep)
        return
    trial_dir = Path(tune.get_context().get_trial_dir())
    checkpoint_dir = trial_dir / "checkpoint"
    try:
        restored = _restore(trial_dir, sweep.on_unreadable_checkpoint)
    except ConfigError as error:
        tune.report({**end_result(sweep, TrialStatus.FAILED, str(error)), **process_facts()})
        return
    ckpt_path = restored.ckpt_path
    resumed = ckpt_path is not None  # restored by Tune: a retry, a resume or a PBT exploit
    fit_start = time.perf_counter()

    def report(trainer: Any, metrics: dict[str, float]) -> None:
        failed = missing_objective(sweep, metrics, trainer.callback_metrics)
        if failed is not None:
            trainer.should_stop = True
            tune.report({**failed, **process_facts()})
            return
        result = epoch_result(trainer, metrics, fit_start, resumed)
        if restored.skipped:
            result["checkpoint/unreadable_skipped"] = len(restored.skipped)
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
            compile_cache=CompileCache(Path(compile_cache)) if compile_cache else None,
        )
    except (ConfigError, SettingsNotInEffectError) as error:
        # Bad task params, or a setting observed not in effect: a retry would fail the
        # same way, so the trial ends here with the message.
        tune.report({**end_result(sweep, TrialStatus.FAILED, str(error)), **process_facts()})
    except InfeasibleError as error:
        tune.report({**end_result(sweep, TrialStatus.INFEASIBLE, error.reason), **process_facts()})
    except (RuntimeError, MemoryError) as error:
        # Out of memory: the trial fails with that reason and the sweep goes on; a retry
        # would run the same settings into the same wall.
        reason = out_of_memory_reason(error)
        if reason is None:
            raise
        error.__traceback__ = None  # its frames hold the fit's tensors
        _release_memory()
        tune.report({**end_result(sweep, TrialStatus.FAILED, reason), **process_facts()})


def _release_memory() -> None:
    """Returns what a failed fit held, so that the worker's next trial starts clean."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
