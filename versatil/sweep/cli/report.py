"""Compare a sweep's trials from MLflow: a table with the Pareto front, CSV/JSON/markdown, plots.

Everything is read back from the MLflow runs (not from Ray's files), so a report works
from any machine that reaches the tracking server.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.int8.runs import INT8_LEGEND, Int8Row, int8_rows, int8_table
from versatil.sweep.results.judgement import judge, summary_text
from versatil.sweep.results.plots import ExtraPoint, plot_front
from versatil.sweep.results.rows import SETTINGS_COLUMNS, THROUGHPUT_COLUMNS, TrialRow
from versatil.sweep.results.verdict import verdict_table
from versatil.sweep.tracking import TrackingContext, child_runs
from versatil.sweep.vocab import tags
from versatil.tables import format_table

__all__ = ["FORMATS", "SweepReport", "load_report", "render", "write_plots"]

FORMATS = ("table", "csv", "json", "markdown")
_NOT_AXES = {"task", "model_dtype", "autocast", "should_convert_model"}


class SweepReport:
    """The trials of one sweep invocation (a parent run), as read from MLflow.

    Args:
        context: The sweep's parent run.
        mode: The primary objective's mode.
        rows: The trials.
        objectives: ``(metric, mode)`` of every objective; default the primary alone.
        tolerance: The verdict's tolerance (see :mod:`versatil.sweep.results.verdict`).
    """

    def __init__(
        self,
        context: TrackingContext,
        mode: str,
        rows: list[TrialRow],
        objectives: list[tuple[str, str]] | None = None,
        tolerance: float = 0.01,
    ) -> None:
        self.context = context
        self.mode = mode
        self.rows = rows
        self.objectives = objectives or [(context.objective, mode)]
        self.judgement = judge(rows, self.objectives, tolerance)
        self.marks = self.judgement.marks
        self.int8: list[Int8Row] = []  # the INT8 runs of `compress`, one per trial


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def load_report(
    tracking_uri: str, experiment: str, parent_run_id: str | None = None
) -> SweepReport:
    """Reads the latest (or the given) sweep run of ``experiment`` and its trials.

    Raises:
        ConfigError: when the experiment or its sweep runs do not exist.
    """
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise ConfigError(
            f"report: no MLflow experiment {experiment!r} at {tracking_uri}; "
            f"choose from {', '.join(sorted(names)) or 'none (run a sweep first)'}"
        )
    if parent_run_id is None:
        parents = client.search_runs(
            [found.experiment_id],
            filter_string=f"tags.`{tags.OBJECTIVE}` != ''",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not parents:
            raise ConfigError(f"report: experiment {experiment!r} holds no sweep run")
        parent = parents[0]
    else:
        parent = client.get_run(parent_run_id)
    objective = parent.data.tags[tags.OBJECTIVE]
    context = TrackingContext(
        tracking_uri=tracking_uri,
        experiment_id=found.experiment_id,
        parent_run_id=parent.info.run_id,
        objective=objective,
    )
    rows = []
    for run in child_runs(client, context):
        metrics = dict(run.data.metrics)
        value = metrics.get(objective)
        history = client.get_metric_history(run.info.run_id, objective) if value is not None else []
        params = run.data.params
        names = run.data.tags.get(tags.AXES)
        axes = {
            k: v if k in SETTINGS_COLUMNS else _number(v)
            for k, v in params.items()
            if (k in names.split(",") if names is not None else k not in _NOT_AXES)
        }
        rows.append(
            TrialRow(
                trial_id=run.data.tags.get(tags.TRIAL_ID, run.info.run_id),
                axes=axes,
                status=TrialStatus(run.data.tags.get(tags.STATUS, TrialStatus.RUNNING)),
                objective=value,
                metrics=metrics,
                # A retried epoch is logged again at the same step: count it once.
                epochs=len({m.step for m in history}),
                reason=run.data.tags.get(tags.REASON, ""),
            )
        )
    rows.sort(key=lambda r: r.trial_id)
    held = parent.data.tags
    mode = held.get(tags.MODE, "min")
    objectives = [tuple(o) for o in json.loads(held.get(tags.OBJECTIVES, "[]"))]
    tolerance = float(held.get(tags.TOLERANCE, 0.01))
    report = SweepReport(context, mode, rows, objectives or None, tolerance)
    report.int8 = int8_rows(client, context)
    return report


def _records(report: SweepReport) -> list[dict[str, Any]]:
    out = []
    for row in report.rows:
        record = {"trial_id": row.trial_id, **row.axes, report.context.objective: row.objective}
        record.update({c: row.metrics.get(c) for c in THROUGHPUT_COLUMNS})
        record.update({m: row.metrics.get(m) for m, _ in report.objectives[1:]})
        ranking = report.judgement.ranking
        record.update(
            epochs=row.epochs,
            status=row.status,
            reason=row.reason,
            best=report.marks.get(row.trial_id) == "*",
            pareto=row.trial_id in report.marks,
        )
        if ranking is not None:
            record["pareto_rank"] = ranking.rank.get(row.trial_id)
        out.append(record)
    return out


def render(report: SweepReport, fmt: str) -> str:
    """The report as text in one of :data:`FORMATS`."""
    if fmt == "table":
        return summary_text(report.rows, report.judgement, [_int8_section(report, fmt)])
    records = _records(report)
    if fmt == "json":
        return json.dumps(records, indent=2, default=str)
    columns = list(dict.fromkeys(k for r in records for k in r))
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        writer.writerows(records)
        return buffer.getvalue()
    table = [[record.get(c) for c in columns] for record in records]
    markdown = format_table(columns, table, style="markdown", missing="")
    if report.int8:
        markdown += "\n\n" + _int8_section(report, fmt)
    verdict = report.judgement.verdict
    speeds = verdict_table(verdict)
    if speeds:
        markdown += "\n\n```\n" + speeds + "\n```"
    return markdown + "\n\n" + verdict.text + "\n"


def _int8_section(report: SweepReport, fmt: str) -> str:
    """The INT8 runs' table and legend (empty when none was compressed)."""
    if not report.int8:
        return ""
    table = int8_table(report.int8, report.context.objective, fmt)
    return f"{table}\n\n{INT8_LEGEND}"


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
        and r.metrics.get("samples_per_sec") is not None
    ]
    precisions = sorted({str(r.axes.get("precision")) for r in done})
    colours = dict(zip(precisions, plt.cm.tab10.colors, strict=False))

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for precision in precisions:
        mine = [r for r in done if str(r.axes.get("precision")) == precision]
        axis.scatter(
            [r.metrics["samples_per_sec"] for r in mine],
            [r.objective for r in mine],
            label=precision,
            color=colours[precision],
            s=40,
        )
    front = sorted(
        (r for r in done if r.trial_id in report.marks), key=lambda r: r.metrics["samples_per_sec"]
    )
    axis.plot(
        [r.metrics["samples_per_sec"] for r in front],
        [r.objective for r in front],
        "k--",
        linewidth=1,
        label="Pareto front",
    )
    for point, marker in zip(extra_points, itertools.cycle("Ds^vP"), strict=False):
        if objective in point.values and "samples_per_sec" in point.values:
            axis.scatter(
                point.values["samples_per_sec"],
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
        groups.setdefault(key, []).append(float(row.metrics["samples_per_sec"]))
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
        if report.context.objective in values and "samples_per_sec" in values:
            points.append(ExtraPoint(f"{row.trial_id} INT8 ({row.backend}, inference)", values))
    return points


def log_report(
    report: SweepReport, directory: Path, extra_points: Sequence[ExtraPoint] = ()
) -> list[Path]:
    """Writes the plots, CSV and markdown to ``directory`` and logs them to the parent run."""
    from mlflow.tracking import MlflowClient

    paths = write_plots(report, directory, extra_points)
    for name, fmt in (("report.csv", "csv"), ("report.md", "markdown")):
        path = directory / name
        path.write_text(render(report, fmt))
        paths.append(path)
    client = MlflowClient(tracking_uri=report.context.tracking_uri)
    for path in paths:
        client.log_artifact(report.context.parent_run_id, str(path), artifact_path="report")
    return paths
