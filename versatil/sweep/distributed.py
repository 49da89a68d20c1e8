"""Data-parallel trials: one Tune trial runs its fit on several Ray Train workers (DDP).

The trial's own process only coordinates; each Ray Train worker holds
``resources.cpu``/``resources.gpu`` and runs Lightning with Ray's DDP strategy (gloo on
CPU, NCCL on GPU). Rank 0's metrics and checkpoint reach Tune through Ray's
``TuneReportCallback``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from versatil.sweep.config import SweepConfig
from versatil.sweep.trial import _process_facts, end_result, epoch_result
from versatil.training.config import TrainConfig

__all__ = ["run_distributed_trial"]


def run_distributed_trial(config: TrainConfig, sweep: SweepConfig) -> None:
    """Fits ``config`` on ``resources.workers_per_trial`` Ray Train workers."""
    import ray.train
    from ray import tune
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    resources = sweep.resources
    per_worker = {"CPU": resources.cpu, **({"GPU": resources.gpu} if resources.gpu else {})}
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config={
            "config": config.to_yaml_dict(),
            "sweep": sweep,
        },
        torch_config=TorchConfig(backend="nccl" if resources.gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(
            num_workers=resources.workers_per_trial,
            use_gpu=resources.gpu > 0,
            resources_per_worker=per_worker,
        ),
        run_config=ray.train.RunConfig(
            name=tune.get_context().get_trial_id(),
            storage_path=str(sweep.storage_dir() / "distributed"),
            callbacks=[TuneReportCallback()],
        ),
    )
    trainer.fit()


def _train_worker(loop_config: dict[str, Any]) -> None:
    """The loop each Ray Train worker runs: the same fit as a single-worker trial."""
    import ray.train
    from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment

    from versatil.cli_common import quiet_libraries
    from versatil.training.fit import InfeasibleError, train

    quiet_libraries()
    config = TrainConfig.from_mapping(loop_config["config"])
    sweep: SweepConfig = loop_config["sweep"]
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="versatil-ddp-"))
    fit_start = time.perf_counter()

    def report(trainer: Any, metrics: dict[str, float]) -> None:
        # Every rank reports (Ray Train synchronizes on it); rank 0 brings the checkpoint.
        result = epoch_result(trainer, metrics, fit_start, resumed=False)
        checkpoint = ray.train.Checkpoint.from_directory(checkpoint_dir)
        ray.train.report(result, checkpoint=checkpoint if trainer.is_global_zero else None)

    try:
        train(
            config,
            checkpoint_dir,
            on_epoch_end=report,
            strategy=RayDDPStrategy(),
            plugins=[RayLightningEnvironment()],
            devices="auto",
        )
    except InfeasibleError as error:
        ray.train.report({**end_result(sweep, "infeasible", error.reason), **_process_facts()})
