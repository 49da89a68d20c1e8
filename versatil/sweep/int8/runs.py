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

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from versatil.sweep.tracking import TrackingContext
from versatil.sweep.vocab import tags
from versatil.tables import format_table

__all__ = [
    "INT8_LEGEND",
    "Int8Point",
    "Int8Row",
    "compressed_dir",
    "int8_metrics",
    "int8_points",
    "int8_rows",
    "int8_table",
    "log_int8_run",
]


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
    name = f"{trial_run.info.run_name or trial_id}/int8"
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
    client.log_artifacts(run_id, str(result.output_dir), artifact_path="checkpoint")
    client.set_terminated(run_id, "FINISHED")
    return run_id


@dataclasses.dataclass(frozen=True)
class Int8Row:
    """One INT8 run as the report shows it.

    Attributes:
        trial_id: The trial it compresses.
        run_id: The INT8 run.
        parent_run_id: The trial's run (the INT8 run's ``mlflow.parentRunId``).
        backend: ``torchao`` or ``torch.ao``.
        source: Where the trained checkpoint came from.
        metrics: The run's metrics (see :func:`int8_metrics`).
    """

    trial_id: str
    run_id: str
    parent_run_id: str
    backend: str
    source: str
    metrics: Mapping[str, float]


def int8_rows(client: Any, context: TrackingContext) -> list[Int8Row]:
    """The sweep's INT8 runs, the latest per trial, in trial order."""
    runs = client.search_runs(
        [context.experiment_id],
        filter_string=f"tags.`{tags.INT8_SWEEP_RUN}` = '{context.parent_run_id}'",
        order_by=["attributes.start_time DESC"],
        max_results=10_000,
    )
    latest: dict[str, Int8Row] = {}
    for run in runs:
        if run.info.status != "FINISHED":
            continue
        held = run.data.tags
        trial_id = held.get(tags.INT8_TRIAL, "")
        latest.setdefault(
            trial_id,
            Int8Row(
                trial_id=trial_id,
                run_id=run.info.run_id,
                parent_run_id=held.get(tags.PARENT, ""),
                backend=held.get(tags.INT8_BACKEND, ""),
                source=held.get(tags.INT8_SOURCE, ""),
                metrics=dict(run.data.metrics),
            ),
        )
    return [latest[t] for t in sorted(latest)]


def int8_table(rows: Sequence[Int8Row], objective: str, style: str = "plain") -> str:
    """The INT8 runs beside the float32 models they came from: objective, speed, size."""
    headers = [
        "trial",
        "backend",
        f"fp32 {objective}",
        f"int8 {objective}",
        "delta",
        "fp32 samples/s",
        "int8 samples/s",
        "speedup",
        "fp32 MB",
        "int8 MB",
        "size ratio",
        "int8 run",
    ]
    table = [
        [
            row.trial_id,
            row.backend,
            row.metrics.get(f"fp32/{objective}"),
            row.metrics.get(f"int8/{objective}"),
            row.metrics.get(f"int8/{objective}_delta"),
            row.metrics.get("fp32/samples_per_sec"),
            row.metrics.get("int8/samples_per_sec"),
            row.metrics.get("int8/speedup"),
            row.metrics.get("fp32/size_mb"),
            row.metrics.get("int8/size_mb"),
            row.metrics.get("int8/size_ratio"),
            row.run_id,
        ]
        for row in rows
    ]
    return format_table(headers, table, style="markdown" if style == "markdown" else "plain")


INT8_LEGEND = (
    "INT8: each trial's last checkpoint, Linear layers quantized (dynamic) after training; "
    "fp32 and int8 validated and timed on CPU (inference samples/s, not training)"
)


class Int8Point(NamedTuple):
    """An INT8 point a plot can draw beside the trials.

    ``samples_per_sec`` is the INT8 model's inference throughput on CPU, not the training
    throughput the trials' points show.
    """

    trial_id: str
    objective: float
    samples_per_sec: float
    label: str


def int8_points(rows: Sequence[Int8Row], objective: str) -> list[Int8Point]:
    """``(trial, objective, samples_per_sec, label)`` of each INT8 run with finite values.

    Args:
        rows: The INT8 runs (``SweepReport.int8``).
        objective: The sweep's objective metric.
    """
    points = []
    for row in rows:
        value = row.metrics.get(f"int8/{objective}")
        speed = row.metrics.get("int8/samples_per_sec")
        if value is None or speed is None or not (math.isfinite(value) and math.isfinite(speed)):
            continue
        points.append(Int8Point(row.trial_id, value, speed, f"{row.trial_id} int8 ({row.backend})"))
    return points


def compressed_dir(output: Path, trial_id: str) -> Path:
    """Where ``compress`` writes a trial's INT8 checkpoint directory."""
    return Path(output) / f"{trial_id}-int8"
