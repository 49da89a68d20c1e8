"""INT8 runs in MLflow: each compressed trial logged as a run nested under the trial's run.

An INT8 run's ``mlflow.parentRunId`` is its trial's run (not the sweep's parent run, so it
is never mistaken for a trial), and its tags say which trial and sweep run it compresses,
which backend quantized and where the checkpoint came from. Its metrics are the INT8
model's (``int8/<objective>``, ``int8/samples_per_sec``, ``int8/size_mb``), the float32
baseline's (``fp32/...``) and the changes (``int8/<objective>_delta``, ``int8/speedup``,
``int8/size_ratio``). Throughput here is inference on CPU, measured by the compress step
for both models on the same validation batches; the trials' own ``samples_per_sec`` is
training throughput.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from versatil.status import MLFLOW_FINISHED
from versatil.sweep.tracking import TrackingContext
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import CHECKPOINT_ARTIFACT, int8_dir, int8_run_name

__all__ = ["compressed_dir", "int8_metrics", "log_int8_run"]


def int8_metrics(result: Any) -> dict[str, float]:
    """The metrics of an INT8 run from a ``CompressionResult``."""
    name = result.objective
    return {
        f"int8/{name}": result.objective_after,
        f"int8/{name}_delta": result.objective_delta,
        "int8/samples_per_sec": result.samples_per_sec_after,
        "int8/speedup": result.speedup,
        "int8/size_mb": result.size_mb_after,
        "int8/size_ratio": result.size_mb_after / result.size_mb_before,
        f"fp32/{name}": result.objective_before,
        "fp32/samples_per_sec": result.samples_per_sec_before,
        "fp32/size_mb": result.size_mb_before,
    }


def log_int8_run(
    client: Any,
    context: TrackingContext,
    trial_run: Any,
    trial_id: str,
    result: Any,
    source: str,
) -> str:
    """Logs a compressed trial as a finished run nested under its trial's run.

    Args:
        client: An ``MlflowClient`` of the sweep's store.
        context: The sweep's parent run.
        trial_run: The trial's MLflow run.
        trial_id: The trial's id.
        result: What ``post_training_compress`` measured and wrote.
        source: Where the trained checkpoint came from.

    Returns:
        The INT8 run's id. Its ``checkpoint/`` artifact is the compressed directory.
    """
    from mlflow.entities import Metric, Param

    from versatil.quantization.backends import quantization_info

    run_tags = {
        tags.PARENT: trial_run.info.run_id,
        tags.INT8_TRIAL: trial_id,
        tags.INT8_SWEEP_RUN: context.parent_run_id,
        tags.INT8_BACKEND: result.backend.value,
        tags.INT8_SOURCE: source[:5000],
    }
    if result.fallback_reason:
        run_tags[tags.INT8_FALLBACK] = result.fallback_reason[:5000]
    name = int8_run_name(trial_run.info.run_name or trial_id)
    run = client.create_run(context.experiment_id, run_name=name, tags=run_tags)
    run_id = run.info.run_id
    info = quantization_info(result.backend)
    params = {
        "scheme": info["scheme"],
        "library_version": str(info["library_version"]),
        "objective": result.objective,
        "batches": str(result.batches),
        "samples": str(result.samples),
    }
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, 0) for k, v in int8_metrics(result).items()]
    client.log_batch(
        run_id, metrics=metrics, params=[Param(f"int8.{k}", v) for k, v in params.items()]
    )
    client.log_artifacts(run_id, str(result.output_dir), artifact_path=CHECKPOINT_ARTIFACT)
    client.set_terminated(run_id, MLFLOW_FINISHED)
    return run_id


def compressed_dir(output: Path, trial_id: str) -> Path:
    """Where ``compress`` writes a trial's INT8 checkpoint directory."""
    return int8_dir(Path(output), trial_id)
