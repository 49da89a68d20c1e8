"""The trainable: one Ray Tune trial is settings -> feasibility -> apply -> fit -> report.

Torch and Lightning are imported inside the trial, not at module import, so the driver
stays light; with actor reuse each worker process pays those imports once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.sweep.plan import TrialPlan
from versatil.sweep.worker.gpus import require_given_gpu
from versatil.sweep.worker.outcome import ending_result, epoch_report, resume_point
from versatil.sweep.worker.restore import copy_checkpoint
from versatil.sweep.worker.tenancy import gpu_tenancy

__all__ = ["run_trial"]


def run_trial(axes: dict[str, Any], plan: TrialPlan, compile_cache: str | None = None) -> None:
    """Runs one trial inside a Tune worker; reports every epoch with its checkpoint.

    Infeasible settings end the trial with one result whose status is ``infeasible`` and
    whose reason says why; bad task params, a setting not in effect, running out of
    memory and a GPU accelerator in a trial Ray gave no GPU end it ``failed`` with the
    reason (see :mod:`versatil.sweep.worker.outcome`); the sweep goes on. A trial with a
    fraction of a GPU reports how many trials shared it (see
    :mod:`versatil.sweep.worker.tenancy`). With ``resources.workers_per_trial > 1`` the
    fit runs data-parallel across Ray Train workers instead, and ends the same ways. The
    driver logs every result to MLflow; the worker never talks to the tracking server.

    Args:
        axes: The trial's point in the sweep's space.
        plan: The trial's part of the sweep's plan.
        compile_cache: The directory where compiled trials share their compiled graphs
            (see :mod:`versatil.training.compile_cache`); ``None`` compiles every trial.
    """
    from ray import tune

    from versatil.cli_common import quiet_libraries
    from versatil.training.compile_cache import CompileCache
    from versatil.training.fit import train
    from versatil.training.hardware.ceiling import CeilingCache
    from versatil.training.spec import DeviceInfo

    quiet_libraries()
    try:
        config = plan.train_config(axes)
        if not plan.resources.distributed:  # else each rank checks its own
            require_given_gpu(config.accelerator, plan.resources.gpus)
        resume = resume_point(plan.on_unreadable_checkpoint)
    except ConfigError as error:
        tune.report(ending_result(plan, error).to_dict())
        return
    if plan.resources.distributed:
        from versatil.sweep.worker.distributed import run_distributed_trial

        run_distributed_trial(config, plan, resume)
        return
    trial_dir = Path(tune.get_context().get_trial_dir())
    checkpoint_dir = trial_dir / "checkpoint"
    ckpt_path = None
    if resume.checkpoint_dir is not None:
        ckpt_path = copy_checkpoint(resume.checkpoint_dir, trial_dir / "restored")
    resumed = ckpt_path is not None  # restored by Tune: a retry, a resume or a PBT exploit
    device = DeviceInfo.detect(config.accelerator)
    fit_start = time.perf_counter()

    def report(trainer: Any, metrics: dict[str, float]) -> None:
        result, with_checkpoint = epoch_report(plan, trainer, metrics, fit_start, resumed)
        if not with_checkpoint:
            tune.report(result.to_dict())
            return
        checkpoint = tune.Checkpoint.from_directory(checkpoint_dir)
        tune.report(resume.annotate(result).to_dict(), checkpoint=checkpoint)

    try:
        with gpu_tenancy(plan, tune.get_context().get_trial_id()) as tenants:
            train(
                config,
                checkpoint_dir,
                on_epoch_end=report,
                ckpt_path=ckpt_path,
                # The params PBT mutates: after an exploit, the optimizer takes the values
                # the task configures from them, not those restored from the checkpoint.
                optimizer_keys=plan.mutated,
                device=device,
                compile_cache=CompileCache(Path(compile_cache)) if compile_cache else None,
                ceilings=CeilingCache(plan.ceiling_dir(), also=plan.compute_dtypes(device)),
                device_tenants=tenants,
            )
    except Exception as error:
        # Bad task params, a setting not in effect, infeasible settings, out of memory: a
        # retry would fail the same way, so the trial ends here with the reason.
        ended = ending_result(plan, error)
        if ended is None:
            raise
        tune.report(ended.to_dict())
