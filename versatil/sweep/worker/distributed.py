"""Data-parallel trials: one Tune trial runs its fit on several Ray Train workers (DDP).

The trial's own process only coordinates; each Ray Train worker holds ``resources.cpu``
and the GPUs of ``resources.gpu`` (one by default with a GPU accelerator) and runs
Lightning with Ray's DDP strategy (gloo on CPU, NCCL on GPU). Rank 0's checkpoint goes
to Ray Train's storage; the coordinator reports each epoch to Tune with that checkpoint,
which Tune copies into the trial's directory (the Train copy is then deleted). So a trial
Tune restores (a retry, ``--resume``) has a checkpoint: the coordinator picks the newest
readable one (see :func:`~versatil.sweep.worker.outcome.resume_point`) and every rank
resumes the fit from its ``last.ckpt``.

The trial ends as a single-worker one does (:mod:`versatil.sweep.worker.outcome`): a rank
whose fit meets bad task params, infeasible settings, a setting not in effect or the end
of its memory raises the trial's ending result; Ray Train stops every rank, and the
coordinator reports that result instead of raising.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from versatil.sweep.plan import TrialPlan
from versatil.sweep.worker.gpus import require_given_gpu
from versatil.sweep.worker.outcome import (
    Resume,
    TrialEnded,
    ending_result,
    epoch_report,
    rank_ending,
)
from versatil.sweep.worker.tenancy import gpu_tenancy
from versatil.training.config import TrainConfig

__all__ = ["run_distributed_trial"]


def run_distributed_trial(config: TrainConfig, plan: TrialPlan, resume: Resume) -> None:
    """Fits ``config`` on ``resources.workers_per_trial`` Ray Train workers.

    Ray Train runs in a thread; this one reports each epoch to Tune as the Train
    controller forwards it, then the result a rank ended the trial with, if one did, or
    else re-raises what the fit raised.

    Args:
        config: The trial's run configuration.
        plan: The trial's part of the sweep's plan.
        resume: Where the fit goes on from (:func:`~versatil.sweep.worker.outcome.resume_point`).
    """
    import ray.train
    from ray import tune
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.util.queue import Queue

    resources = plan.resources
    gpus = resources.gpus
    restored = None
    if resume.checkpoint_dir is not None:
        # The newest readable of Tune's checkpoints of this trial; each rank copies it.
        filesystem = tune.get_checkpoint().filesystem
        path = resume.remote or str(resume.checkpoint_dir)
        restored = tune.Checkpoint(path=path, filesystem=filesystem)
    reports = Queue(actor_options={"num_cpus": 0})
    per_worker = {"CPU": resources.cpu, **({"GPU": gpus} if gpus else {})}
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config={
            "config": config.to_yaml_dict(),
            "plan": plan,
            "checkpoint": restored,
            "resume": resume,
        },
        torch_config=TorchConfig(backend="nccl" if gpus else "gloo"),
        scaling_config=ray.train.ScalingConfig(
            num_workers=resources.workers_per_trial,
            use_gpu=gpus > 0,
            resources_per_worker=per_worker,
        ),
        run_config=ray.train.RunConfig(
            # A new Train run per attempt: Ray Train would otherwise restore a failed
            # attempt's run on its own, from checkpoints this trial has already moved.
            name=f"{tune.get_context().get_trial_id()}-{uuid.uuid4().hex[:8]}",
            **plan.storage().tune_arguments("distributed"),
            callbacks=[_forward_reports(reports)],
        ),
    )
    failure: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as error:  # re-raised in the trial's thread
            failure.append(error)
        finally:
            # The queue is gone when Tune stopped the trial: then nobody is waiting.
            with contextlib.suppress(Exception):
                reports.put(None)

    thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
    thread.start()
    try:
        while (item := reports.get()) is not None:
            metrics, stored = item
            if stored is None:
                tune.report(metrics)
                continue
            checkpoint = tune.Checkpoint(path=stored.path, filesystem=stored.filesystem)
            tune.report(metrics, checkpoint=checkpoint)
            stored.filesystem.delete_dir(stored.path)  # Tune has copied it
        thread.join()
    finally:
        reports.shutdown()
    if failure:
        ended = rank_ending(failure[0])
        if ended is None:
            raise failure[0]
        tune.report(ended.to_dict())


def _forward_reports(reports: Any) -> Any:
    """A Ray Train callback putting rank 0's metrics and the checkpoint on ``reports``."""
    import ray.train

    class ForwardReports(ray.train.UserCallback):
        def after_report(
            self,
            run_context: Any,
            metrics: list[dict[str, Any]],
            checkpoint: ray.train.Checkpoint | None,
        ) -> None:
            reports.put((dict(metrics[0]), checkpoint))

    return ForwardReports()


def _train_worker(loop_config: dict[str, Any]) -> None:
    """The loop each Ray Train worker runs: the same fit as a single-worker trial."""
    import ray.train
    from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment

    from versatil.cli_common import quiet_libraries
    from versatil.training.fit import train
    from versatil.training.hardware.ceiling import CeilingCache
    from versatil.training.spec import DeviceInfo

    quiet_libraries()
    plan: TrialPlan = loop_config["plan"]
    restored: ray.train.Checkpoint | None = loop_config.get("checkpoint")
    # Where the coordinator found the checkpoint: each epoch counts the ones it skipped.
    resume: Resume = loop_config.get("resume") or Resume()
    # Rank 0 writes here and reports it; Ray Train uploads it to the run's storage. Other
    # ranks write nothing.
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="versatil-ddp-"))
    scratch = [checkpoint_dir]
    try:
        config = TrainConfig.from_mapping(loop_config["config"])
        require_given_gpu(config.accelerator, plan.resources.gpus)
        device = DeviceInfo.detect(config.accelerator)
        ckpt_path = None
        if restored is not None:
            # Every rank loads the checkpoint itself (Lightning restores on each rank).
            local = Path(tempfile.mkdtemp(prefix="versatil-ddp-restored-"))
            scratch.append(local)
            restored.to_directory(str(local))
            ckpt_path = local / "last.ckpt"
        fit_start = time.perf_counter()

        def report(trainer: Any, metrics: dict[str, float]) -> None:
            # Every rank reports (Ray Train synchronizes on it); rank 0 brings the
            # checkpoint. Every rank sees the same metrics, so a failed epoch stops all.
            resumed = ckpt_path is not None
            result, with_checkpoint = epoch_report(plan, trainer, metrics, fit_start, resumed)
            if not with_checkpoint:
                ray.train.report(result.to_dict())
                return
            checkpoint = ray.train.Checkpoint.from_directory(checkpoint_dir)
            ray.train.report(
                resume.annotate(result).to_dict(),
                checkpoint=checkpoint if trainer.is_global_zero else None,
            )

        context = ray.train.get_context()
        holder = f"{context.get_experiment_name()}-rank{context.get_world_rank()}"
        with gpu_tenancy(plan, holder) as tenants:
            train(
                config,
                checkpoint_dir,
                on_epoch_end=report,
                ckpt_path=ckpt_path,
                ceilings=CeilingCache(plan.ceiling_dir(), also=plan.compute_dtypes(device)),
                device_tenants=tenants,
                strategy=RayDDPStrategy(),
                plugins=[RayLightningEnvironment()],
                devices="auto",
            )
    except Exception as error:
        ended = ending_result(plan, error)
        if ended is None:
            raise
        # Not reported from here: a rank that did not fail the same way (out of memory on
        # this rank alone) would wait for this one in its next collective, or in the
        # report, for ever. Raising ends the fit on every rank; the coordinator reports it.
        raise TrialEnded(ended) from None
    finally:
        # Reports upload synchronously, so nothing here is needed any more.
        for directory in scratch:
            shutil.rmtree(directory, ignore_errors=True)
