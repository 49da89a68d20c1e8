"""The end of a sweep's re-timing: which settings it re-times, and what its rounds say.

Pure functions. The candidates are the reference (eager fp32, else the slowest setting),
every setting still in contention (no worse on the objective, and faster, tied, not timed
long enough, or timed on a shared GPU) and the settings of the Pareto set; each is re-timed
from its best trial's checkpoint. The rounds (:mod:`versatil.training.retime`) are one document, the
``confirm/rounds.json`` artifact of the parent run: a setting's speedup is the median of
its per-round ratios to the reference, with its interval (:func:`versatil.stats.ratio_ci`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from versatil.stats import Estimate, ratio_ci
from versatil.sweep.results.answer import Setting, SettingResult, Verdict
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.verdict import setting_of

__all__ = [
    "Candidate",
    "candidates",
    "confirmed_speedups",
    "round_metrics",
    "should_confirm",
]

CONTENDING = ("faster", "tie", "unmeasured", "shared")
"""Speed calls that leave a no-worse setting in contention."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A setting to re-time, through its best trial's checkpoint.

    Attributes:
        label: The setting in words.
        setting: Its precision, compile mode and matmul precision.
        trial_id: The trial whose checkpoint it trains from.
        checkpoint: That checkpoint directory.
    """

    label: str
    setting: Setting
    trial_id: str
    checkpoint: str

    def as_dict(self) -> dict[str, str]:
        """Plain values, for the rounds' document."""
        precision, compile_mode, matmul = self.setting
        return {
            "label": self.label,
            "precision": precision,
            "compile_mode": compile_mode,
            "matmul_precision": matmul,
            "trial_id": self.trial_id,
        }


def candidates(
    verdict: Verdict, rows: Sequence[TrialRow], front: Collection[str], limit: int
) -> list[Candidate]:
    """The settings to re-time, the reference first, at most ``limit``.

    After the reference come the recommended setting, the others in contention by their
    speedup, then the Pareto set's other settings. A setting whose best trial left no
    checkpoint cannot be re-timed and is left out.
    """
    if verdict.reference is None:
        return []
    by_id = {r.trial_id: r for r in rows}
    others = verdict.settings[1:]
    recommended = [s for s in others if s.label == verdict.recommended_setting]
    contending = [s for s in others if s.no_worse and s.speed_call in CONTENDING]
    contending.sort(key=lambda s: -(s.speedup.value if s.speedup else 0.0))
    on_front = {setting_of(by_id[t].axes) for t in front if t in by_id}
    fronted = [s for s in others if s.setting in on_front]
    chosen: list[SettingResult] = []
    for s in (verdict.reference, *recommended, *contending, *fronted):
        if s not in chosen:
            chosen.append(s)
    out = []
    for s in chosen:
        row = by_id.get(s.best_trial)
        if row is not None and row.checkpoint:
            out.append(Candidate(s.label, s.setting, s.best_trial, str(row.checkpoint)))
    if not out or out[0].setting != verdict.reference.setting:
        return []  # nothing to compare with
    return out[:limit]


def should_confirm(verdict: Verdict, found: Sequence[Candidate], enabled: str) -> bool:
    """Whether to re-time: ``auto`` when a setting besides the reference is in contention."""
    if enabled == "off" or len(found) < 2:
        return False
    if enabled == "on":
        return True
    contending = {s.setting for s in verdict.settings[1:] if s.no_worse}
    contending &= {s.setting for s in verdict.settings if s.speed_call in CONTENDING}
    return any(c.setting in contending for c in found[1:])


def _setting(entry: Mapping[str, Any]) -> Setting:
    return str(entry["precision"]), str(entry["compile_mode"]), str(entry["matmul_precision"])


def confirmed_speedups(document: Mapping[str, Any]) -> dict[Setting, Estimate]:
    """Each re-timed setting's speedup over the reference: the median of per-round ratios."""
    rates = document["samples_per_sec"]
    reference = document["contenders"][0]["label"]
    out = {}
    for entry in document["contenders"][1:]:
        out[_setting(entry)] = ratio_ci(rates[entry["label"]], rates[reference])
    return out


def _slug(label: str) -> str:
    return label.replace(" + ", "_").replace(" ", "_")


def round_metrics(
    document: Mapping[str, Any],
) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """The rounds as MLflow metrics: the parent's series, and each candidate run's.

    Each series is one value per round (its step), or one value for a speedup and its
    interval bounds.
    """
    rates = document["samples_per_sec"]
    speedups = confirmed_speedups(document)
    parent: dict[str, list[float]] = {}
    children: dict[str, dict[str, list[float]]] = {}
    for entry in document["contenders"]:
        label, slug = entry["label"], _slug(entry["label"])
        series = {"confirm/samples_per_sec": list(rates[label])}
        speedup = speedups.get(_setting(entry))
        if speedup is not None:
            series["confirm/speedup"] = [speedup.value]
            if speedup.bounded:
                series["confirm/speedup_ci_low"] = [speedup.low]
                series["confirm/speedup_ci_high"] = [speedup.high]
        children[entry["trial_id"]] = series
        for name, values in series.items():
            parent[f"confirm/{slug}/{name.removeprefix('confirm/')}"] = values
    return parent, children
