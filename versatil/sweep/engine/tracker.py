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
from versatil.sweep.plan import Plan
from versatil.sweep.results.confirmation import round_metrics
from versatil.sweep.results.hardware import CEILINGS_ARTIFACT, ceiling_metrics, ceilings_of
from versatil.sweep.results.judgement import Judgement, summary_text
from versatil.sweep.results.race import compute_text, race_text, screen_metrics
from versatil.sweep.results.records import TrialRecord
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.target import TIME_TO_TARGET, target_tags
from versatil.sweep.results.verdict import SettingResult, Verdict
from versatil.sweep.tracking import SweepEnd, SweepTracker, TrackingContext, backfill
from versatil.sweep.tracking.registry import FASTEST_ALIAS, MOST_ACCURATE_ALIAS
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.names import COMPUTE_ARTIFACT, CONFIRM_ARTIFACT, RACE_ARTIFACT

__all__ = ["make_tracker", "pareto_aliases", "recommended_tags", "sweep_end", "version_tags"]


def make_tracker(
    opening: TrackingContext | concurrent.futures.Future,
    plan: Plan,
    records: Callable[[], Sequence[TrialRecord]] | None = None,
) -> SweepTracker:
    """The sweep's tracker; with ``records`` (Tune's, read fresh), an outage is backfilled."""

    def resolve(axes: Mapping[str, Any]) -> Any | None:
        try:
            return plan.trial.train_config(axes)
        except ConfigError:  # the trial fails with this message; its axes alone are logged
            return None

    recover = None
    if records is not None:

        def recover(tracker: SweepTracker) -> None:
            backfill(tracker, records(), close=False)

    return SweepTracker(opening, plan.where, resolve=resolve, recover=recover)


def sweep_end(
    rows: Sequence[TrialRow],
    judgement: Judgement,
    confirmation: Mapping[str, Any] | None = None,
    race: Mapping[str, Any] | None = None,
    compute: Mapping[str, Any] | None = None,
) -> SweepEnd:
    """The end of a sweep whose ``rows`` were judged as ``judgement``.

    With a ``confirmation`` (the re-timing's rounds), the rounds go to the parent run (a
    document and per-candidate series) and to each candidate's run. A race's screen and
    the sweep's compute go to the parent run as documents (and the screen's speedups as
    metrics).
    """
    parent_metrics: dict[str, list[float]] = {}
    child_metrics: dict[str, dict[str, list[float]]] = {}
    documents = {}
    if confirmation:
        parent_metrics, child_metrics = round_metrics(confirmation)
        documents[CONFIRM_ARTIFACT] = dict(confirmation)
    if race:
        documents[RACE_ARTIFACT] = dict(race)
        parent_metrics.update(screen_metrics(race))
    if compute:
        documents[COMPUTE_ARTIFACT] = dict(compute)
    ceilings = ceilings_of(rows)
    if ceilings:
        documents[CEILINGS_ARTIFACT] = {"ceilings": ceilings}
        parent_metrics.update(ceiling_metrics(ceilings))
    for row in rows:
        if TIME_TO_TARGET in row.metrics:
            series = child_metrics.setdefault(row.trial_id, {})
            series[TIME_TO_TARGET] = [row.metrics[TIME_TO_TARGET]]
    child_tags = judgement.child_tags()
    for trial_id, found in target_tags(rows, judgement.verdict.target).items():
        child_tags.setdefault(trial_id, {}).update(found)
    for row in rows:
        if row.report.resumed:  # a PBT exploit may have changed its axes' values
            trained = json.dumps(row.axes, default=str)
            child_tags.setdefault(row.trial_id, {})[tags.TRAINED_AXES] = trained
    parent_tags = {tags.VERDICT: judgement.verdict.text}
    if judgement.verdict.reference is not None:
        parent_tags[tags.REFERENCE] = json.dumps(list(judgement.verdict.reference.setting))
    if judgement.verdict.target is not None:
        parent_tags[tags.TARGET] = repr(judgement.verdict.target)
    aliases = pareto_aliases(judgement.verdict)
    sections = [race_text(race) if race else "", compute_text(compute) if compute else ""]
    return SweepEnd(
        best=judgement.best,
        summary=summary_text(rows, judgement, sections),
        child_tags=child_tags,
        parent_tags=parent_tags,
        parent_metrics=parent_metrics,
        child_metrics=child_metrics,
        parent_documents=documents,
        recommended=judgement.verdict.recommended,
        recommended_tags=recommended_tags(judgement.verdict),
        aliases=aliases,
        version_tags={trial: version_tags(judgement.verdict, trial) for trial in aliases.values()},
    )


def _interval(estimate: Estimate) -> str:
    """``[low, high]``; ``unbounded`` when the data cannot bound it (one seed, one pair)."""
    if not estimate.bounded:
        return "unbounded"
    return f"[{estimate.low:.4g}, {estimate.high:.4g}]"


def pareto_aliases(verdict: Verdict) -> dict[str, str]:
    """The registry's aliases besides ``recommended``, by alias: the trial each points at.

    - ``fastest``: among the no-worse settings (``SettingResult.no_worse``, the reference
      included, at speedup 1) with a measured speedup, the one with the highest speedup's
      point estimate, whether or not its interval clears 1 (the verdict's call); its
      ``best_trial``. Equal speedups go to the verdict's order (the reference first).
      With no measured speedup, there is no ``fastest``.
    - ``most-accurate``: the setting with the best objective (its best configuration's
      mean over seeds, as the verdict reports it), whatever its speed; its ``best_trial``.
      Equal objectives go to the verdict's order. This is the verdict's answer among
      trials that trained their whole budget, not the sweep's single best row.

    A verdict without settings gives none.
    """
    found: dict[str, str] = {}
    timed = [s for s in verdict.settings if s.no_worse and s.speedup is not None]
    if timed:
        fastest = max(timed, key=lambda s: s.speedup.value)  # type: ignore[union-attr]
        found[FASTEST_ALIAS] = fastest.best_trial
    if verdict.settings:
        direction = Direction(verdict.mode)
        accurate = min(verdict.settings, key=lambda s: direction.as_loss(s.objective.value))
        found[MOST_ACCURATE_ALIAS] = accurate.best_trial
    return found


def recommended_tags(verdict: Verdict) -> dict[str, str]:
    """The recommended setting's registered version's tags (:func:`version_tags`)."""
    if verdict.recommended is None:
        return {}
    return version_tags(verdict, verdict.recommended)


def version_tags(verdict: Verdict, trial_id: str) -> dict[str, str]:
    """A registered version's tags: the setting whose best trial it is, speedup, objective.

    The speedup is over the verdict's reference, with its interval (``reference`` for the
    reference itself); the objective is its best configuration's mean over seeds, with
    its interval, named by the metric. A trial that is no setting's best has none.
    """
    chosen = next((s for s in verdict.settings if s.best_trial == trial_id), None)
    if chosen is None:
        return {}
    return _setting_tags(verdict, chosen)


def _setting_tags(verdict: Verdict, chosen: SettingResult) -> dict[str, str]:
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
