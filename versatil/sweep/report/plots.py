"""A sweep's report as files: its plots, CSV and markdown, logged to the parent run."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from versatil.sweep.report.load import SweepReport
from versatil.sweep.report.render import render
from versatil.sweep.results.plots import ExtraPoint, plot_front
from versatil.sweep.tracking.store import client as mlflow_client
from versatil.training.metric_names import SAMPLES_PER_SEC

__all__ = ["int8_extra_points", "log_report", "write_plots"]


def write_plots(
    report: SweepReport, directory: Path, extra_points: Sequence[ExtraPoint] = ()
) -> list[Path]:
    """PNGs: objective vs throughput coloured by precision; throughput per precision x compile.

    A sweep of two or three objectives also gets ``pareto_front.png`` (see
    :func:`~versatil.sweep.results.plots.plot_front`), with ``extra_points`` drawn on it.
    Both draw ``extra_points``, by default the sweep's INT8 runs (see ``compress``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    objective = report.context.objective
    extra_points = list(extra_points) or int8_extra_points(report)
    done = [
        r
        for r in report.rows
        if r.objective is not None
        and math.isfinite(r.objective)
        and r.metrics.get(SAMPLES_PER_SEC) is not None
    ]
    precisions = sorted({str(r.axes.get("precision")) for r in done})
    colours = dict(zip(precisions, plt.cm.tab10.colors, strict=False))

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for precision in precisions:
        mine = [r for r in done if str(r.axes.get("precision")) == precision]
        axis.scatter(
            [r.metrics[SAMPLES_PER_SEC] for r in mine],
            [r.objective for r in mine],
            label=precision,
            color=colours[precision],
            s=40,
        )
    on_front = report.judgement.front
    front = sorted(
        (r for r in done if r.trial_id in on_front), key=lambda r: r.metrics[SAMPLES_PER_SEC]
    )
    axis.plot(
        [r.metrics[SAMPLES_PER_SEC] for r in front],
        [r.objective for r in front],
        "k--",
        linewidth=1,
        label="Pareto front",
    )
    for point, marker in zip(extra_points, itertools.cycle("Ds^vP"), strict=False):
        if objective in point.values and SAMPLES_PER_SEC in point.values:
            axis.scatter(
                point.values[SAMPLES_PER_SEC],
                point.values[objective],
                marker=marker,
                s=60,
                color="black",
                label=point.label,
            )
    axis.set_xlabel("samples_per_sec (last epoch; INT8 points: inference)")
    axis.set_ylabel(objective)
    axis.set_title(f"{objective} vs throughput")
    axis.legend(title="precision", fontsize=8)
    figure.tight_layout()
    scatter = directory / "objective_vs_throughput.png"
    figure.savefig(scatter, dpi=110)
    plt.close(figure)

    groups: dict[str, list[float]] = {}
    for row in done:
        key = f"{row.axes.get('precision')}\n{row.axes.get('compile_mode', 'none')}"
        groups.setdefault(key, []).append(float(row.metrics[SAMPLES_PER_SEC]))
    figure, axis = plt.subplots(figsize=(max(6, 0.9 * len(groups)), 4.5))
    keys = sorted(groups)
    axis.bar(range(len(keys)), [sum(groups[k]) / len(groups[k]) for k in keys], color="tab:blue")
    axis.set_xticks(range(len(keys)), keys, fontsize=8)
    axis.set_ylabel("mean samples_per_sec")
    axis.set_title("throughput per precision x compile mode")
    figure.tight_layout()
    bars = directory / "throughput_by_settings.png"
    figure.savefig(bars, dpi=110)
    plt.close(figure)
    paths = [scatter, bars]
    ranking = report.judgement.ranking
    if ranking is not None and len(ranking.objectives) in (2, 3):
        front = directory / "pareto_front.png"
        plot_front(report.rows, ranking, front, extra_points)
        paths.append(front)
    return paths


def int8_extra_points(report: SweepReport) -> list[ExtraPoint]:
    """The sweep's INT8 runs as points on its plots: objective and inference samples/s."""
    points = []
    for row in report.int8:
        values = {
            name.removeprefix("int8/"): value
            for name, value in row.metrics.items()
            if name.startswith("int8/") and math.isfinite(value)
        }
        if report.context.objective in values and SAMPLES_PER_SEC in values:
            points.append(ExtraPoint(f"{row.trial_id} INT8 ({row.backend}, inference)", values))
    return points


def log_report(
    report: SweepReport, directory: Path, extra_points: Sequence[ExtraPoint] = ()
) -> list[Path]:
    """Writes the plots, CSV and markdown to ``directory`` and logs them to the parent run."""
    paths = write_plots(report, directory, extra_points)
    for name, fmt in (("report.csv", "csv"), ("report.md", "markdown")):
        path = directory / name
        path.write_text(render(report, fmt))
        paths.append(path)
    client = mlflow_client(report.context.tracking_uri)
    for path in paths:
        client.log_artifact(report.context.parent_run_id, str(path), artifact_path="report")
    return paths
