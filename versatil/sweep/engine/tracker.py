"""Tracking wired to a sweep: its tracker, and the end of a sweep as tracking logs it.

Tracking takes plain values and functions; this is where the driver (and ``sync``) hand
it the sweep's own: how a trial's axes resolve to its run configuration, how Tune's
records backfill what an outage missed, and the judged rows' tags and summary.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from versatil.errors import ConfigError
from versatil.stats import Estimate
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.trial import train_config_for
from versatil.sweep.results.confirmation import round_metrics
from versatil.sweep.results.hardware import CEILINGS_ARTIFACT, ceiling_metrics, ceilings_of
from versatil.sweep.results.judgement import Judgement, summary_text
from versatil.sweep.results.records import TrialRecord
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.target import TIME_TO_TARGET
from versatil.sweep.results.verdict import Verdict
from versatil.sweep.tracking import SweepEnd, SweepTracker, TrackingContext, backfill
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import CONFIRM_ARTIFACT

__all__ = ["make_tracker", "recommended_tags", "sweep_end"]


def make_tracker(
    opening: TrackingContext | concurrent.futures.Future,
    config: SweepConfig,
    records: Callable[[], Sequence[TrialRecord]] | None = None,
) -> SweepTracker:
    """The sweep's tracker; with ``records`` (Tune's, read fresh), an outage is backfilled."""

    def resolve(axes: Mapping[str, Any]) -> Any | None:
        try:
            return train_config_for(dict(axes), config)
        except ConfigError:  # the trial fails with this message; its axes alone are logged
            return None

    recover = None
    if records is not None:

        def recover(tracker: SweepTracker) -> None:
            backfill(tracker, records(), close=False)

    return SweepTracker(opening, config, resolve=resolve, recover=recover)


def sweep_end(
    rows: Sequence[TrialRow], judgement: Judgement, confirmation: Mapping[str, Any] | None = None
) -> SweepEnd:
    """The end of a sweep whose ``rows`` were judged as ``judgement``.

    With a ``confirmation`` (the re-timing's rounds), the rounds go to the parent run (a
    document and per-candidate series) and to each candidate's run.
    """
    parent_metrics: dict[str, list[float]] = {}
    child_metrics: dict[str, dict[str, list[float]]] = {}
    documents = {}
    if confirmation:
        parent_metrics, child_metrics = round_metrics(confirmation)
        documents[CONFIRM_ARTIFACT] = dict(confirmation)
    ceilings = ceilings_of(rows)
    if ceilings:
        documents[CEILINGS_ARTIFACT] = {"ceilings": ceilings}
        parent_metrics.update(ceiling_metrics(ceilings))
    for row in rows:
        if TIME_TO_TARGET in row.metrics:
            series = child_metrics.setdefault(row.trial_id, {})
            series[TIME_TO_TARGET] = [row.metrics[TIME_TO_TARGET]]
    child_tags = judgement.child_tags()
    for row in rows:
        if row.report.resumed:  # a PBT exploit may have changed its axes' values
            trained = json.dumps(row.axes, default=str)
            child_tags.setdefault(row.trial_id, {})[tags.TRAINED_AXES] = trained
    parent_tags = {tags.VERDICT: judgement.verdict.text}
    if judgement.verdict.target is not None:
        parent_tags[tags.TARGET] = repr(judgement.verdict.target)
    return SweepEnd(
        best=judgement.best,
        summary=summary_text(rows, judgement),
        child_tags=child_tags,
        parent_tags=parent_tags,
        parent_metrics=parent_metrics,
        child_metrics=child_metrics,
        parent_documents=documents,
        recommended=judgement.verdict.recommended,
        recommended_tags=recommended_tags(judgement.verdict),
    )


def _interval(estimate: Estimate) -> str:
    """``[low, high]``; ``unbounded`` when the data cannot bound it (one seed, one pair)."""
    if not estimate.bounded:
        return "unbounded"
    return f"[{estimate.low:.4g}, {estimate.high:.4g}]"


def recommended_tags(verdict: Verdict) -> dict[str, str]:
    """The registered version's tags: the recommended setting, its speedup, its objective.

    The speedup is over the verdict's reference, with its interval (``reference`` for the
    reference itself); the objective is its best configuration's mean over seeds, with
    its interval, named by the metric.
    """
    chosen = next((s for s in verdict.settings if s.best_trial == verdict.recommended), None)
    if chosen is None:
        return {}
    precision, compile_mode, matmul = chosen.setting
    found = {
        tags.VERSION_SETTING: chosen.label,
        "precision": precision,
        "compile_mode": compile_mode,
        "matmul_precision": matmul,
        tags.OBJECTIVE: verdict.metric,
        tags.VERSION_OBJECTIVE: f"{chosen.objective.value:.6g}",
        tags.VERSION_OBJECTIVE_INTERVAL: _interval(chosen.objective),
        tags.VERSION_SPEEDUP: "reference" if chosen is verdict.reference else "unmeasured",
    }
    if chosen.speedup is not None and chosen is not verdict.reference:
        found[tags.VERSION_SPEEDUP] = f"{chosen.speedup.value:.4g}"
        found[tags.VERSION_SPEEDUP_INTERVAL] = _interval(chosen.speedup)
    return found
