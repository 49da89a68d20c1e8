"""The answer in words: each setting's speed against eager fp32, and the recommendation.

Pure functions on a sweep's rows. A setting is a trial's precision, compile mode and
matmul precision (a setting the sweep does not vary is what trials trained with: 32,
eager, highest). The baseline is eager fp32: precision 32, compile mode none, matmul
precision highest (torch's default, so ``none`` counts as highest). Only trials that
finished (status completed) with a finite primary objective and a throughput count.

A setting's speed is the median ``samples_per_sec`` (last epoch, steady state) of its
finished trials and its objective the best of them. The recommendation is the fastest
finished trial whose primary objective is within ``tolerance`` of the best one, relative
(``0.01``: at most 1% worse than the best).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.sweep.results.rows import TrialRow, full_budget, value_of
from versatil.training.metric_names import SAMPLES_PER_SEC
from versatil.training.spec import setting_label

__all__ = [
    "BASELINE",
    "SettingSpeed",
    "Verdict",
    "make_verdict",
    "setting_of",
    "verdict_table",
]

BASELINE = {"precision": "32", "compile_mode": "none", "matmul_precision": "highest"}
"""Eager fp32: the settings every other setting's speed is compared with."""

_DEFAULTS = {"precision": "32", "compile_mode": "none", "matmul_precision": "highest"}
THROUGHPUT = SAMPLES_PER_SEC


@dataclasses.dataclass(frozen=True)
class SettingSpeed:
    """One setting's finished trials, summed up.

    Attributes:
        label: The setting in words (``bf16-mixed + default``).
        samples_per_sec: The median throughput of its finished trials.
        objective: The best primary objective among them.
        trials: How many finished.
        speedup: ``samples_per_sec`` over the reference's.
        change: The objective's change from the reference's, relative (``None`` when the
            reference's objective is 0).
    """

    label: str
    samples_per_sec: float
    objective: float
    trials: int
    speedup: float
    change: float | None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a sweep says: speeds against a reference, and the recommended trial.

    Attributes:
        metric: The primary objective.
        mode: Its mode.
        tolerance: How far from the best objective still counts as as good (relative).
        reference: The setting speeds are compared with (``None``: nothing finished).
        is_baseline: Whether the reference is eager fp32 (else the slowest setting).
        settings: Every setting, fastest first.
        recommended: The recommended trial id.
        text: The verdict in words.
    """

    metric: str
    mode: str
    tolerance: float
    reference: SettingSpeed | None
    is_baseline: bool
    settings: list[SettingSpeed]
    recommended: str | None
    text: str


def setting_of(axes: Mapping[str, Any]) -> tuple[str, str, str]:
    """A trial's precision, compile mode and matmul precision, defaults filled in."""
    values = []
    for name, default in _DEFAULTS.items():
        value = axes.get(name)
        values.append(default if value in (None, "none") else str(value))
    return tuple(values)  # type: ignore[return-value]


def _finished(rows: Sequence[TrialRow], metric: str) -> list[TrialRow]:
    """The trials that trained their whole budget, with a finite objective and throughput."""
    return [
        r
        for r in rows
        if full_budget(r)
        and value_of(r, metric) is not None
        and value_of(r, THROUGHPUT) is not None
    ]


def _change(value: float, reference: float) -> float | None:
    return None if reference == 0 else (value - reference) / abs(reference)


def percent(change: float) -> str:
    """A relative change as a signed percentage: ``+30.0%``, ``+0.4%``, ``+0.18%``, ``-0.00%``."""
    value = 100 * change
    if abs(value) >= 1:
        return f"{value:+.1f}%"
    return f"{value:+.2g}%" if abs(value) >= 0.01 else f"{value:+.2f}%"


def _change_text(metric: str, value: float, reference: float) -> str:
    change = _change(value, reference)
    return f"{metric} {value - reference:+.4g}" if change is None else f"{metric} {percent(change)}"


def _speed_text(speedup: float, than: str) -> str:
    if speedup >= 1:
        return f"trains {speedup:.2f}x faster than {than}"
    return f"trains at {speedup:.2f}x the speed of {than}"


def make_verdict(rows: Sequence[Any], metric: str, mode: str, tolerance: float = 0.01) -> Verdict:
    r"""Compares each setting with eager fp32 (or the slowest) and picks the recommendation.

    Args:
        rows: The sweep's :class:`~versatil.sweep.results.rows.TrialRow`\ s.
        metric: The primary objective.
        mode: ``min`` or ``max``.
        tolerance: The recommendation's objective is within this fraction of the best.
    """
    finished = _finished(rows, metric)
    if not finished:
        text = f"No trial finished with a finite {metric} and throughput: nothing to recommend."
        return Verdict(metric, mode, tolerance, None, False, [], None, text)
    sign = 1.0 if mode == "min" else -1.0
    show_matmul = any(r.axes.get("matmul_precision") not in (None, "none") for r in rows)
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for row in finished:
        groups.setdefault(setting_of(row.axes), []).append(row)
    speed = {s: statistics.median(r.metrics[THROUGHPUT] for r in g) for s, g in groups.items()}
    best_of = {s: min(sign * r.metrics[metric] for r in g) * sign for s, g in groups.items()}
    baseline = tuple(BASELINE.values())
    is_baseline = baseline in groups
    reference = baseline if is_baseline else min(groups, key=lambda s: (speed[s], s))
    settings = [
        SettingSpeed(
            label=setting_label(*s, show_matmul=show_matmul),
            samples_per_sec=speed[s],
            objective=best_of[s],
            trials=len(groups[s]),
            speedup=speed[s] / speed[reference],
            change=_change(best_of[s], best_of[reference]),
        )
        for s in sorted(groups, key=lambda s: (-speed[s], s))
    ]
    ref = next(x for x in settings if x.label == setting_label(*reference, show_matmul=show_matmul))

    best = min(sign * r.metrics[metric] for r in finished) * sign
    margin = tolerance * abs(best)
    good = [r for r in finished if sign * (r.metrics[metric] - best) <= margin]
    chosen = min(good, key=lambda r: (-r.metrics[THROUGHPUT], sign * r.metrics[metric], r.trial_id))
    label = setting_label(*setting_of(chosen.axes), show_matmul=show_matmul)
    varied = {k for r in rows for k in r.axes if len({repr(o.axes.get(k)) for o in rows}) > 1}
    others = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in chosen.axes.items()
        if k not in _DEFAULTS and k in varied
    )
    name = f"{label} ({others})" if others else label
    within = (
        f"the fastest finished trial ({chosen.trial_id}) within {tolerance:.1%} of the best "
        f"{metric} ({best:.4g})"
    )
    # Settings against settings (each one's median speed), never one trial against a median.
    chosen_setting = setting_of(chosen.axes)
    ratio = speed[chosen_setting] / speed[reference]
    change = _change_text(metric, chosen.metrics[metric], ref.objective)
    if is_baseline:
        than = f"eager fp32 ({ref.label})"
        if chosen_setting == baseline:
            text = f"Recommended: {name}, the eager fp32 baseline itself: it is {within}."
        else:
            text = f"Recommended: {name} {_speed_text(ratio, than)} at {change}; it is {within}."
    else:
        text = (
            "No eager fp32 baseline (precision 32, compile_mode none, matmul_precision "
            f"highest) finished in this sweep, so speeds are relative to the slowest finished "
            f"setting, {ref.label}. "
        )
        if chosen_setting == reference:  # never a setting against itself
            text += f"Recommended: {name}, that setting itself: it is {within}."
        else:
            text += (
                f"Recommended: {name} {_speed_text(ratio, ref.label)} at {change}; it is {within}."
            )
    return Verdict(metric, mode, tolerance, ref, is_baseline, settings, chosen.trial_id, text)


def verdict_table(verdict: Verdict) -> str:
    """Each setting's speed and objective against the reference, as a text table."""
    from versatil.tables import format_table

    if verdict.reference is None:
        return ""
    reference = "eager fp32" if verdict.is_baseline else "slowest"
    headers = [
        "setting",
        SAMPLES_PER_SEC,
        f"x {reference}",
        verdict.metric,
        f"{verdict.metric} vs {reference}",
        "trials",
    ]
    table = [
        [
            s.label,
            round(s.samples_per_sec, 1),
            f"{s.speedup:.2f}x",
            s.objective,
            "n/a" if s.change is None else percent(s.change),
            s.trials,
        ]
        for s in verdict.settings
    ]
    return format_table(headers, table)
