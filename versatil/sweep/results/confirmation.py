"""The end of a sweep's re-timing: which settings it re-times, and what its rounds say.

Pure functions. The candidates are the reference (eager fp32, else the slowest setting)
and every setting in contention: no worse on the objective (or undecided), and faster,
tied, not timed long enough, or timed on a shared GPU. A setting already measured slower
beyond noise is not re-timed. The Pareto set's other settings not measured slower fill
the room the groups leave. Each is re-timed from its best trial's checkpoint.

The cap (``confirm.max_candidates``) is the size of a group, the reference included:
with more candidates than one group holds, they are re-timed in several groups, one after
the other, each with the reference first (:func:`groups`), so no setting in contention is
left unmeasured. The rounds (:mod:`versatil.training.retime`) are one document, the
``confirm/rounds.json`` artifact of the parent run: ``contenders`` (every candidate, the
reference first) and ``groups`` (each group's rounds). A setting's speedup is the median
of its per-round ratios to the reference of its group, with its interval
(:func:`versatil.stats.ratio_ci`). A document without ``groups`` (written before groups
existed) is read as one group.
"""

from __future__ import annotations

import dataclasses
import math
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
    "groups",
    "in_contention",
    "round_groups",
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


def in_contention(result: SettingResult) -> bool:
    """Whether a setting could still be the answer, so its speed must be measured.

    No worse on the objective, or undecided on it, and not measured slower (its speed
    call is one of :data:`CONTENDING`).
    """
    passes = result.no_worse or getattr(result, "objective_call", None) == "undecided"
    return passes and result.speed_call in CONTENDING


def candidates(
    verdict: Verdict,
    rows: Sequence[TrialRow],
    front: Collection[str],
    limit: int,
    slower: bool = False,
) -> list[Candidate]:
    """The settings to re-time, the reference first; :func:`groups` splits them by ``limit``.

    After the reference come the recommended setting and the others in contention, by
    their speedup (every one of them, whatever ``limit``), then the Pareto set's other
    settings, as many as the groups the contending ones need have room for (one group
    when none contends). A setting whose best trial left no checkpoint cannot be re-timed
    and is left out.

    Args:
        verdict: The sweep's verdict from its trials' own timing.
        rows: Its trials.
        front: The trial ids of the Pareto set.
        limit: The settings one group holds, the reference included (at least 2).
        slower: Whether the Pareto set's settings measured slower are re-timed too
            (``confirm.enabled: on``); else they are not.
    """
    if verdict.reference is None:
        return []
    by_id = {r.trial_id: r for r in rows}
    others = verdict.settings[1:]
    recommended = [s for s in others if s.label == verdict.recommended_setting]
    contending = [s for s in others if in_contention(s)]
    contending.sort(key=lambda s: -(s.speedup.value if s.speedup else 0.0))
    on_front = {setting_of(by_id[t].axes) for t in front if t in by_id}
    fronted = [s for s in others if s.setting in on_front and (slower or s.speed_call != "slower")]
    needed = _with_checkpoint([verdict.reference, *recommended, *contending], by_id)
    if not needed or needed[0].setting != verdict.reference.setting:
        return []  # nothing to compare with
    extra = [c for c in _with_checkpoint(fronted, by_id) if c not in needed]
    room = max(1, math.ceil((len(needed) - 1) / (limit - 1))) * (limit - 1) - (len(needed) - 1)
    return needed + extra[:room]


def _with_checkpoint(
    settings: Sequence[SettingResult], by_id: Mapping[str, TrialRow]
) -> list[Candidate]:
    """The settings whose best trial left a checkpoint, as candidates, each once."""
    out: list[Candidate] = []
    for s in settings:
        row = by_id.get(s.best_trial)
        if row is None or not row.checkpoint:
            continue
        found = Candidate(s.label, s.setting, s.best_trial, str(row.checkpoint))
        if found not in out:
            out.append(found)
    return out


def groups(found: Sequence[Candidate], limit: int) -> list[list[Candidate]]:
    """The candidates in groups of at most ``limit``, each with the reference first.

    ``found`` is the reference first, then the others (:func:`candidates`); each group
    holds the reference and up to ``limit - 1`` of the others, in their order.
    """
    if len(found) < 2:
        return []
    reference, others = found[0], list(found[1:])
    size = max(1, limit - 1)
    return [[reference, *others[i : i + size]] for i in range(0, len(others), size)]


def should_confirm(verdict: Verdict, found: Sequence[Candidate], enabled: str) -> bool:
    """Whether to re-time: ``auto`` when a setting besides the reference is in contention."""
    if enabled == "off" or len(found) < 2:
        return False
    if enabled == "on":
        return True
    contending = {s.setting for s in verdict.settings[1:] if in_contention(s)}
    return any(c.setting in contending for c in found[1:])


def _setting(entry: Mapping[str, Any]) -> Setting:
    return str(entry["precision"]), str(entry["compile_mode"]), str(entry["matmul_precision"])


def round_groups(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document's groups of rounds, each with its ``contenders``, the reference first.

    A document written before groups existed holds one group's rounds at its top level:
    it is that one group.
    """
    entries = {entry["label"]: entry for entry in document["contenders"]}
    if "groups" not in document:
        return [{**document, "contenders": list(document["contenders"])}]
    out = []
    for group in document["groups"]:
        out.append({**group, "contenders": [entries[label] for label in group["labels"]]})
    return out


def confirmed_speedups(document: Mapping[str, Any]) -> dict[Setting, Estimate]:
    """Each re-timed setting's speedup over the reference: the median of per-round ratios.

    Each setting against the reference's rounds in its own group; the groups' speedups
    merged into one mapping (:func:`~versatil.sweep.results.verdict.make_verdict`'s
    ``confirmed``).
    """
    out = {}
    for group in round_groups(document):
        rates = group["samples_per_sec"]
        reference = group["contenders"][0]["label"]
        for entry in group["contenders"][1:]:
            out[_setting(entry)] = ratio_ci(rates[entry["label"]], rates[reference])
    return out


def _slug(label: str) -> str:
    return label.replace(" + ", "_").replace(" ", "_")


def round_metrics(
    document: Mapping[str, Any],
) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """The rounds as MLflow metrics: the parent's series, and each candidate run's.

    Each series is one value per round (its step), or one value for a speedup and its
    interval bounds. The reference's samples/s series holds its rounds of every group,
    group after group.
    """
    speedups = confirmed_speedups(document)
    rates: dict[str, list[float]] = {}
    for group in round_groups(document):
        for label, values in group["samples_per_sec"].items():
            rates.setdefault(label, []).extend(values)
    parent: dict[str, list[float]] = {}
    children: dict[str, dict[str, list[float]]] = {}
    for entry in document["contenders"]:
        label, slug = entry["label"], _slug(entry["label"])
        series = {"confirm/samples_per_sec": list(rates.get(label, []))}
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
