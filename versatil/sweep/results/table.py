"""The summary table a sweep's end and ``report`` print: one row per trial."""

from __future__ import annotations

from collections.abc import Sequence

from versatil.sweep.results.compile_cost import GRAPHS, compile_cell, compile_cost
from versatil.sweep.results.rows import SETTINGS_COLUMNS, THROUGHPUT_COLUMNS, TrialRow
from versatil.tables import format_table

__all__ = ["summary_table"]


def summary_table(
    rows: Sequence[TrialRow],
    objective: str,
    marks: dict[str, str] | None = None,
    *,
    other_objectives: Sequence[str] = (),
    ranks: dict[str, int] | None = None,
) -> str:
    """A fixed-width text table: settings, other axes, objective, throughput, status.

    A sweep with compiled trials adds a ``compile`` column after the compile time: each
    compiled trial's FX graphs, graph breaks and recompiles (``2 graphs, 0 breaks,
    1 recompile``), ``-`` for an eager one.

    Args:
        rows: The trials.
        objective: The (primary) objective metric's name (a column header).
        marks: Optional one-character marks per trial id (``*`` best, ``P`` Pareto).
        other_objectives: Further objective metrics, shown after the primary one.
        ranks: Optional Pareto rank per trial id (a ``rank`` column).
    """
    axis_names = [c for c in SETTINGS_COLUMNS if any(c in r.axes for r in rows)]
    axis_names += sorted({k for r in rows for k in r.axes} - set(SETTINGS_COLUMNS))
    extra = [m for m in other_objectives if m not in THROUGHPUT_COLUMNS and m != objective]
    rank_header = ["rank"] if ranks is not None else []
    compile_header = ["compile"] if any(GRAPHS in r.metrics for r in rows) else []
    headers = [
        "",
        *rank_header,
        "trial",
        *axis_names,
        objective,
        *extra,
        *THROUGHPUT_COLUMNS,
        *compile_header,
        "epochs",
        "status",
    ]
    table = [
        [
            (marks or {}).get(row.trial_id, ""),
            *([ranks.get(row.trial_id)] if ranks is not None else []),
            row.trial_id,
            *(row.axes.get(a) for a in axis_names),
            row.objective,
            *(row.metrics.get(m) for m in extra),
            *(row.metrics.get(c) for c in THROUGHPUT_COLUMNS),
            *([compile_cell(compile_cost([row], None), seconds=False)] if compile_header else []),
            row.epochs,
            row.status + (f": {row.reason}" if row.reason else ""),
        ]
        for row in rows
    ]
    return format_table(headers, table)
