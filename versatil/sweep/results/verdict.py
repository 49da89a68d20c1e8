"""The answer: each setting against eager fp32, a difference called only beyond its noise.

Pure functions on a sweep's rows. A setting is a trial's precision, compile mode and
matmul precision (a setting the sweep does not vary is what trials trained with: 32,
eager, highest). The baseline is eager fp32: precision 32, compile mode none, matmul
precision highest (torch's default, so ``none`` counts as highest). Only trials that
trained their whole budget to a finite objective count.

The rules, in order:

- **Speed.** A trial's speed is its fit's median throughput over windows of training,
  with its 95% interval (:mod:`versatil.training.metrics`); a trial whose timed work was
  too short has none, nor has one timed while other trials shared its GPU
  (``throughput_shared``): neither is ranked on speed. A setting left without a speedup
  is ``shared`` when sharing is why, else ``unmeasured``; the sweep's end re-times it
  (:mod:`~versatil.sweep.results.confirmation`), on a whole GPU. A setting's speedup against the
  reference pairs its trials with the reference's trials of the same params and seed,
  each pair's interval the division of the two; the speedup is the median over the pairs
  of each bound. With no such pairs the settings' intervals (their trials' hull) are
  divided. A setting is **faster** only when the whole interval lies above 1.
- **Objective.** A setting's objective is its best configuration's mean over seeds, with
  a Student-t interval. Its change from the reference's (relative) pairs the two best
  configurations' trials by seed (replicate k of every configuration trains with the same
  seed): a Student-t interval over the per-seed differences, so identical per-seed
  objectives give exactly 0 ± 0; where fewer than two seeds line up, Welch's unpaired
  interval, said ``unpaired``. "No worse" is a non-inferiority claim
  (:mod:`~versatil.sweep.results.noninferiority`): with replicates, **no worse** only when
  the worse end of the change's interval lies within ``tolerance``, **worse** when its
  better end lies beyond it, else **undecided** (with how many seeds would decide
  it), never no worse; with one seed, the point estimate against the tolerance. Objectives
  equal but for float rounding are equal.
- **Recommendation.** The faster and no worse settings contend; the fastest wins, and
  any whose speedup interval overlaps the winner's ties with it. Among tied settings the
  simpler wins (fewer settings changed from eager fp32). With no contender the reference
  is recommended, and the sentence says that nothing measured beat it beyond noise,
  naming the no-worse (or undecided) settings left without a measured speed.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.stats import Estimate, ratio_of, speed_verdict
from versatil.sweep.results.answer import Setting, SettingResult, Verdict
from versatil.sweep.results.compile_cost import compile_cost
from versatil.sweep.results.hardware import setting_hardware
from versatil.sweep.results.noninferiority import NO_WORSE, objective_call, objective_change
from versatil.sweep.results.ranking import rank_key
from versatil.sweep.results.rows import TrialRow, full_budget, timed_shared, value_of
from versatil.sweep.results.target import TIME_TO_TARGET
from versatil.sweep.results.verdict_text import verdict_text
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.keys import SEED
from versatil.training.metric_names import SAMPLES_PER_SEC
from versatil.training.spec import TrialSettings, setting_label

__all__ = [
    "BASELINE",
    "SettingResult",
    "Verdict",
    "make_verdict",
    "reference_objective",
    "setting_of",
    "trial_speed",
]

BASELINE = TrialSettings().as_axes()
"""Eager fp32, training's own default settings: what every other setting is compared with."""

THROUGHPUT = SAMPLES_PER_SEC


def setting_of(axes: Mapping[str, Any]) -> Setting:
    """A trial's precision, compile mode and matmul precision, defaults filled in."""
    values = []
    for name, default in BASELINE.items():
        value = axes.get(name)
        values.append(default if value in (None, "none") else str(value))
    return tuple(values)  # type: ignore[return-value]


def trial_speed(row: TrialRow) -> Estimate | None:
    """A trial's throughput as a measurement, or ``None`` when it cannot be trusted.

    The fit's median over its windows and their 95% interval; a fit with too few windows
    (``throughput_too_short``), without an interval, or timed while other trials shared
    its GPU (:func:`~versatil.sweep.results.rows.timed_shared`) has none.
    """
    if timed_shared(row):
        return None
    median = value_of(row, f"{SAMPLES_PER_SEC}_median")
    low = value_of(row, f"{SAMPLES_PER_SEC}_ci_low")
    high = value_of(row, f"{SAMPLES_PER_SEC}_ci_high")
    if median is None or low is None or high is None or row.metrics.get("throughput_too_short"):
        return None
    windows = value_of(row, "throughput_windows")
    return Estimate(median, low, high, int(windows or 0))


def _params(axes: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A trial's configuration apart from its setting and its seed."""
    return tuple(sorted((k, repr(v)) for k, v in axes.items() if k not in BASELINE and k != SEED))


def _seed(axes: Mapping[str, Any]) -> str:
    return repr(axes.get(SEED))


def _hull(estimates: Sequence[Estimate]) -> Estimate:
    """Several trials' speed as one: their median, the hull of their intervals."""
    return Estimate(
        statistics.median(e.value for e in estimates),
        min(e.low for e in estimates),
        max(e.high for e in estimates),
        sum(e.n for e in estimates),
    )


def _speedup(rows: Sequence[TrialRow], reference: Sequence[TrialRow]) -> Estimate | None:
    """A setting's speed over the reference's: paired by params and seed where possible."""
    ours = {(_params(r.axes), _seed(r.axes)): trial_speed(r) for r in rows}
    theirs = {(_params(r.axes), _seed(r.axes)): trial_speed(r) for r in reference}
    pairs = [
        ratio_of(ours[k], theirs[k])  # type: ignore[arg-type]
        for k in sorted(ours.keys() & theirs.keys())
        if ours[k] is not None and theirs[k] is not None
    ]
    if pairs:
        return Estimate(
            statistics.median(p.value for p in pairs),
            statistics.median(p.low for p in pairs),
            statistics.median(p.high for p in pairs),
            len(pairs),
        )
    mine = [e for e in ours.values() if e is not None]
    other = [e for e in theirs.values() if e is not None]
    if not mine or not other:
        return None
    return ratio_of(_hull(mine), _hull(other))


def _best_configuration(rows: Sequence[TrialRow], mode: str) -> list[TrialRow]:
    """The replicates of the configuration with the best mean objective."""
    direction = Direction(mode)
    groups: dict[tuple[tuple[str, str], ...], list[TrialRow]] = {}
    for row in rows:
        groups.setdefault(_params(row.axes), []).append(row)

    def key(item: tuple[Any, list[TrialRow]]) -> tuple[float, Any]:
        mean = statistics.fmean(float(r.objective) for r in item[1])  # type: ignore[arg-type]
        return direction.as_loss(float(f"{mean:.6g}")), item[0]

    return min(groups.items(), key=key)[1]


def _complexity(setting: Setting) -> tuple[int, Setting]:
    """How far a setting is from eager fp32: the settings it changes, then its values."""
    return sum(a != b for a, b in zip(setting, BASELINE.values(), strict=True)), setting


def make_verdict(
    rows: Sequence[Any],
    metric: str,
    mode: str,
    tolerance: float = 0.01,
    confirmed: Mapping[Setting, Estimate] | None = None,
    target: float | None = None,
    reference: Setting | None = None,
) -> Verdict:
    r"""Compares each setting with eager fp32 (or the sweep's reference) and recommends one.

    Args:
        rows: The sweep's :class:`~versatil.sweep.results.rows.TrialRow`\ s.
        metric: The primary objective.
        mode: ``min`` or ``max``.
        tolerance: A setting's objective may be this much worse than the reference's
            (relative) and still count as no worse.
        confirmed: Speedups over the reference measured in paired rounds
            (:mod:`~versatil.sweep.results.confirmation`); they replace the trials' own.
        target: The objective the rows' ``time_to_target_s`` was measured to
            (:mod:`~versatil.sweep.results.target`), if any.
        reference: The sweep's reference when its space has no eager fp32 (each settings
            axis at its first listed value, :mod:`versatil.sweep.config.reference`); the
            slowest finished setting is the reference when it did not finish either.
    """
    finished, groups = _grouped(rows, metric)
    if not finished:
        text = f"No trial finished with a finite {metric}: nothing to recommend."
        return Verdict(metric, mode, tolerance, None, False, [], None, None, [], text)
    show_matmul = any(r.axes.get("matmul_precision") not in (None, "none") for r in rows)
    speed = _speeds(groups)
    wanted = reference
    reference, is_baseline = _reference(groups, speed, wanted)
    ref_best = _best_configuration(groups[reference], mode)
    varied = sorted(
        {k for r in finished for k in r.axes if len({repr(o.axes.get(k)) for o in finished}) > 1}
        - {*BASELINE, SEED}
    )
    results = []
    for setting, group in groups.items():
        best = _best_configuration(group, mode)
        found = objective_change(best, ref_best)
        judged, needed = objective_call(found, mode, tolerance)
        speedup, call, rounds = _against_reference(setting, reference, groups, speed, confirmed)
        results.append(
            SettingResult(
                label=setting_label(*setting, show_matmul=show_matmul),
                setting=setting,
                speed=speed[setting],
                speedup=speedup,
                speed_call=call,
                objective=found.objective,
                change=found.change,
                no_worse=judged == NO_WORSE,
                trials=len(group),
                seeds=len(best),
                best_trial=min(best, key=lambda r: rank_key(r, mode)).trial_id,
                params=", ".join(f"{k}={_short(best[0].axes.get(k))}" for k in varied),
                rounds=rounds,
                time_to_target=_median_time(best),
                reached_target=sum(TIME_TO_TARGET in r.metrics for r in best),
                objective_call=judged,
                paired=found.paired,
                seeds_to_decide=needed,
                hardware=setting_hardware(group),
                compile=compile_cost(group, speedup),
            )
        )
    results.sort(
        key=lambda r: (
            r.setting != reference,
            -(r.speedup.value if r.speedup else -math.inf),
            r.setting,
        )
    )
    ref = results[0]
    chosen, tied = _recommend(ref, results[1:])
    verdict = Verdict(
        metric=metric,
        mode=mode,
        tolerance=tolerance,
        reference=ref,
        is_baseline=is_baseline,
        settings=results,
        recommended=chosen.best_trial,
        recommended_setting=chosen.label,
        tied=[r.label for r in tied] if len(tied) > 1 else [],
        text="",
        target=target,
        listed_reference=not is_baseline and reference == wanted,
    )
    return dataclasses.replace(verdict, text=verdict_text(verdict))


def reference_objective(
    rows: Sequence[Any], metric: str, mode: str, reference: Setting | None = None
) -> float | None:
    """The reference setting's objective, as :func:`make_verdict` would report it.

    The mean over the seeds of the reference's best configuration: the default target of
    the time to target (:mod:`~versatil.sweep.results.target`), found without making the
    whole verdict. ``None`` when no trial finished with a finite ``metric``.
    """
    finished, groups = _grouped(rows, metric)
    if not finished:
        return None
    chosen, _ = _reference(groups, _speeds(groups), reference)
    best = _best_configuration(groups[chosen], mode)
    return objective_change(best, best).objective.value


def _grouped(
    rows: Sequence[TrialRow], metric: str
) -> tuple[list[TrialRow], dict[Setting, list[TrialRow]]]:
    """The trials that ran their full budget to a finite ``metric``, and them by setting."""
    finished = [r for r in rows if full_budget(r) and value_of(r, metric) is not None]
    groups: dict[Setting, list[TrialRow]] = {}
    for row in finished:
        groups.setdefault(setting_of(row.axes), []).append(row)
    return finished, groups


def _speeds(groups: Mapping[Setting, Sequence[TrialRow]]) -> dict[Setting, Estimate | None]:
    """Each setting's speed: its trials' measured speeds as one, ``None`` with none."""
    speeds = {s: [e for e in map(trial_speed, g) if e is not None] for s, g in groups.items()}
    return {s: _hull(e) if e else None for s, e in speeds.items()}


def _reference(
    groups: Mapping[Setting, Sequence[TrialRow]],
    speed: Mapping[Setting, Estimate | None],
    wanted: Setting | None = None,
) -> tuple[Setting, bool]:
    """The setting every other is compared with, and whether it is the baseline.

    Eager fp32 when the sweep ran it; else the sweep's own reference (``wanted``) when it
    finished; else the slowest measured setting, else the slowest by its raw throughput.
    """
    baseline: Setting = tuple(BASELINE.values())  # type: ignore[assignment]
    if baseline in groups:
        return baseline, True
    if wanted is not None and wanted in groups:
        return wanted, False
    return min(groups, key=lambda s: (_slowness(speed[s], groups[s]), s)), False


def _against_reference(
    setting: Setting,
    reference: Setting,
    groups: Mapping[Setting, Sequence[TrialRow]],
    speed: Mapping[Setting, Estimate | None],
    confirmed: Mapping[Setting, Estimate] | None,
) -> tuple[Estimate | None, str, int]:
    """A setting's speedup over the reference, its call and its rounds (the reference: 1x).

    The reference's speedup is 1 when it was timed, by its trials or by the re-timing's
    rounds; else ``None``.
    """
    if setting != reference:
        return _speed_call(groups[setting], groups[reference], confirmed, setting)
    timed = speed[setting] is not None or bool(confirmed)
    return (Estimate(1.0, 1.0, 1.0, 1) if timed else None), "reference", 0


def _speed_call(
    rows: Sequence[TrialRow],
    reference: Sequence[TrialRow],
    confirmed: Mapping[Setting, Estimate] | None,
    setting: Setting,
) -> tuple[Estimate | None, str, int]:
    """A setting's speedup over the reference, its call, and the paired rounds behind it.

    The re-timing's speedup where the setting was re-timed, else its trials' against the
    reference's. Without one, the call says why: ``shared`` when its trials or the
    reference's were timed on a shared GPU, else ``unmeasured`` (timed too short).
    """
    if confirmed and setting in confirmed:
        return confirmed[setting], speed_verdict(confirmed[setting]), confirmed[setting].n
    speedup = _speedup(rows, reference)
    if speedup is not None:
        return speedup, speed_verdict(speedup), 0
    shared = any(map(timed_shared, [*rows, *reference]))
    return None, "shared" if shared else "unmeasured", 0


def _recommend(
    reference: SettingResult, others: Sequence[SettingResult]
) -> tuple[SettingResult, list[SettingResult]]:
    """The recommended setting, and those tied with it on speed (itself first).

    The faster and no worse settings contend; any whose speedup interval overlaps the
    fastest's ties with it, and the simplest of the tied wins. With no contender, the
    reference.
    """
    contenders = [r for r in others if r.speed_call == "faster" and r.no_worse]
    if not contenders:
        return reference, []
    top = max(contenders, key=lambda r: (r.speedup.value, r.setting))  # type: ignore[union-attr]
    tied = [
        r
        for r in contenders
        if r is top or r.speedup.high >= top.speedup.low  # type: ignore[union-attr]
    ]
    chosen = min(tied, key=lambda r: (_complexity(r.setting), -r.speedup.value))  # type: ignore[union-attr]
    return chosen, [chosen, *(r for r in tied if r is not chosen)]


def _median_time(rows: Sequence[TrialRow]) -> float | None:
    """The median time to target of the seeds that reached it, if at least half did.

    A median over the few seeds that reached the target, the others left out, would
    flatter a setting that mostly never gets there: it is ``never`` then.
    """
    times = [v for v in (value_of(r, TIME_TO_TARGET) for r in rows) if v is not None]
    return statistics.median(times) if times and 2 * len(times) >= len(rows) else None


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _slowness(speed: Estimate | None, rows: Sequence[TrialRow]) -> float:
    if speed is not None:
        return speed.value
    raw = [v for v in (value_of(r, THROUGHPUT) for r in rows) if v is not None]
    return statistics.median(raw) if raw else math.inf
