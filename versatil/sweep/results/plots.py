"""The plot of a multi-objective sweep's Pareto front (two or three objectives), as a PNG."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from versatil.sweep.results.pareto import Ranking
from versatil.sweep.results.verdict import setting_of
from versatil.training.spec import setting_label

__all__ = ["ExtraPoint", "plot_front"]


@dataclasses.dataclass(frozen=True)
class ExtraPoint:
    """A labelled point drawn on the front that is not a trial (e.g. a compressed model).

    Attributes:
        label: What the legend calls it.
        values: Its value of each objective metric; a point missing one is not drawn.
    """

    label: str
    values: Mapping[str, float]


def plot_front(
    rows: Sequence[Any], ranking: Ranking, path: Path, extra_points: Sequence[ExtraPoint] = ()
) -> Path:
    """Writes the finished trials, the Pareto set labelled by setting, and ``extra_points``.

    Two objectives make one panel (the first objective on the y axis, the front joined by a
    line); three make one panel per pair.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m, _ in ranking.objectives]
    by_id = {r.trial_id: r for r in rows}
    show_matmul = any(r.axes.get("matmul_precision") not in (None, "none") for r in rows)
    front = set(ranking.front)
    pairs = [(1, 0)] if len(metrics) == 2 else list(itertools.combinations(range(3), 2))
    figure, axes = plt.subplots(1, len(pairs), figsize=(7 * len(pairs), 5), squeeze=False)
    for axis, (x, y) in zip(axes[0], pairs, strict=True):
        for trial in ranking.order:
            row = by_id[trial]
            on_front = trial in front
            axis.scatter(
                row.metrics[metrics[x]],
                row.metrics[metrics[y]],
                color="tab:red" if on_front else "tab:gray",
                s=50 if on_front else 25,
                zorder=3,
            )
            if on_front:
                label = setting_label(*setting_of(row.axes), show_matmul=show_matmul)
                axis.annotate(
                    f"#{ranking.rank[trial]} {label}",
                    (row.metrics[metrics[x]], row.metrics[metrics[y]]),
                    textcoords="offset points",
                    xytext=(5, 5),
                    fontsize=7,
                )
        if len(metrics) == 2:
            line = sorted(ranking.front, key=lambda t: by_id[t].metrics[metrics[x]])
            axis.plot(
                [by_id[t].metrics[metrics[x]] for t in line],
                [by_id[t].metrics[metrics[y]] for t in line],
                "r--",
                linewidth=1,
            )
        markers = itertools.cycle("Ds^vP")
        for point in extra_points:
            if metrics[x] in point.values and metrics[y] in point.values:
                axis.scatter(
                    point.values[metrics[x]],
                    point.values[metrics[y]],
                    marker=next(markers),
                    s=60,
                    label=point.label,
                    zorder=4,
                )
        modes = dict(ranking.objectives)
        axis.set_xlabel(f"{metrics[x]} ({modes[metrics[x]]})")
        axis.set_ylabel(f"{metrics[y]} ({modes[metrics[y]]})")
        axis.scatter([], [], color="tab:red", label="Pareto set (#rank)")
        axis.scatter([], [], color="tab:gray", label="dominated")
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
        axis.margins(x=0.15, y=0.1)  # room for the labels
    left = len(ranking.left_out)
    note = f"; {left} unfinished trial(s) left out" if left else ""
    figure.suptitle(f"Pareto front: {len(front)} of {len(ranking.order)} finished trials{note}")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
