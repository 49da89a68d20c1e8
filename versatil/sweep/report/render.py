"""A sweep's report as text: the summary table, CSV, JSON or markdown, and INT8's table."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from versatil.sweep.report.load import Int8Row, SweepReport
from versatil.sweep.results.hardware import ceiling_text
from versatil.sweep.results.judgement import summary_text
from versatil.sweep.results.race import compute_text, race_text
from versatil.sweep.results.rows import THROUGHPUT_COLUMNS
from versatil.sweep.results.verdict_text import verdict_table
from versatil.tables import format_table

__all__ = ["FORMATS", "INT8_LEGEND", "int8_table", "render"]

FORMATS = ("table", "csv", "json", "markdown")


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
            pareto=row.trial_id in report.judgement.front,
            within_noise_of_front=report.marks.get(row.trial_id) == "~",
        )
        if ranking is not None:
            record["pareto_rank"] = ranking.rank.get(row.trial_id)
        out.append(record)
    return out


def render(report: SweepReport, fmt: str) -> str:
    """The report as text in one of :data:`FORMATS`.

    JSON is the answer as well as the trials: an object with ``trials`` (one record per
    trial), ``settings`` (each setting's speedup against the reference with its interval,
    its objective's mean with its interval, and its FLOPs, TFLOP/s, ceiling share, MFU and
    energy where measured), ``verdict`` (the recommended setting, the settings tied with
    it, and the sentence), ``ceilings`` (each device's measured matmul ceilings),
    ``compute`` (device-seconds by phase, :func:`~versatil.sweep.results.race.compute_summary`)
    and, for a race, ``race`` (its screen and the settings it did not train).
    """
    if fmt == "table":
        sections = [ceiling_text(report.ceilings), _int8_section(report, fmt)]
        sections += [race_text(report.race) if report.race else ""]
        sections += [compute_text(report.compute) if report.compute else ""]
        return summary_text(report.rows, report.judgement, sections)
    records = _records(report)
    if fmt == "json":
        verdict = report.judgement.verdict
        answer = {
            "trials": records,
            "settings": [s.as_dict() for s in verdict.settings],
            "verdict": verdict.as_dict(),
            "ceilings": report.ceilings,
            "compute": report.compute,
        }
        if report.race:
            answer["race"] = report.race
        return json.dumps(answer, indent=2, default=str)
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
