"""One configuration's replicates (its seeds) summed up: the objective's mean and interval."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from versatil.stats import Estimate, mean_ci
from versatil.sweep.results.rows import TrialRow, full_budget, value_of
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.keys import SEED
from versatil.sweep.vocab.names import configuration_name
from versatil.tables import format_table
from versatil.training.metric_names import SAMPLES_PER_SEC

__all__ = ["Configuration", "configurations", "replicate_tags", "replicates_table"]


@dataclasses.dataclass(frozen=True)
class Configuration:
    """The finished replicates of one configuration.

    Attributes:
        name: The configuration (its run name without the seed).
        trial_ids: Its finished trials.
        seeds: Their seeds.
        objective: The objective's mean over them, with its Student-t interval.
        samples_per_sec: Their median throughput (``None`` when none reported one).
    """

    name: str
    trial_ids: list[str]
    seeds: list[int | None]
    objective: Estimate
    samples_per_sec: float | None


def configurations(rows: Sequence[TrialRow]) -> list[Configuration]:
    """The configurations of the trials that trained their whole budget, in row order."""
    groups: dict[str, list[TrialRow]] = {}
    for row in rows:
        if full_budget(row):
            groups.setdefault(configuration_name(row.axes), []).append(row)
    out = []
    for name, group in groups.items():
        speeds = [v for v in (value_of(r, SAMPLES_PER_SEC) for r in group) if v is not None]
        out.append(
            Configuration(
                name=name,
                trial_ids=[r.trial_id for r in group],
                seeds=[r.axes.get(SEED) for r in group],
                objective=mean_ci([float(r.objective) for r in group]),  # type: ignore[arg-type]
                samples_per_sec=statistics.median(speeds) if speeds else None,
            )
        )
    return out


def _plus_minus(estimate: Estimate) -> str:
    if not estimate.bounded:
        return f"{estimate.value:.6g}"
    return f"{estimate.value:.6g} ± {(estimate.high - estimate.low) / 2:.2g}"


def replicates_table(rows: Sequence[TrialRow], metric: str) -> str:
    """Each configuration's objective over its seeds, when some configuration has several."""
    found = configurations(rows)
    if not any(len(c.trial_ids) > 1 for c in found):
        return ""
    table = [
        [
            c.name,
            len(c.trial_ids),
            _plus_minus(c.objective),
            "n/a" if c.samples_per_sec is None else f"{c.samples_per_sec:.0f}",
            " ".join(c.trial_ids),
        ]
        for c in found
    ]
    headers = ["configuration", "seeds", f"{metric} (mean ± 95% CI)", SAMPLES_PER_SEC, "trials"]
    return (
        format_table(headers, table)
        + "\nconfigurations over their seeds: replicates (and a configuration the searcher "
        "suggested again, trained with another seed) are averaged, never ranked as rivals"
    )


def replicate_tags(rows: Sequence[TrialRow]) -> dict[str, dict[str, str]]:
    """Per trial id, its configuration's objective over its seeds, as a tag."""
    out = {}
    for c in configurations(rows):
        if len(c.trial_ids) > 1:
            text = f"{_plus_minus(c.objective)} ({len(c.trial_ids)} seeds)"
            out.update({t: {tags.OBJECTIVE_OVER_SEEDS: text} for t in c.trial_ids})
    return out
