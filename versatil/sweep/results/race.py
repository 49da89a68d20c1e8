"""A race in the answer: its screen, the settings it never trained and why, and its cost.

Pure functions on the screen's document (:mod:`versatil.sweep.engine.race`), the trials'
rows and the re-timing's document. :func:`race_summary` is the race as the JSON answer
holds it; :func:`compute_summary` is any sweep's device-seconds by phase (a grid's screen
is 0); :func:`race_text` and :func:`compute_text` are their lines in the summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.status import TrialStatus
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.verdict import setting_of
from versatil.training.spec import setting_label

__all__ = [
    "NOT_TRAINED_ANSWER",
    "compute_summary",
    "compute_text",
    "race_summary",
    "race_text",
    "screen_metrics",
]

NOT_TRAINED_ANSWER = "not trained: slower than the answer in the screen"
"""Why a setting the screen kept was not trained: the race stopped at a faster one."""

TIME_TOTAL = "time_total_s"
"""Tune's seconds of a trial, in its last result."""


def _trained(rows: Sequence[TrialRow]) -> set[tuple[str, ...]]:
    return {setting_of(r.axes) for r in rows if r.status != TrialStatus.INFEASIBLE}


def race_summary(
    screen: Mapping[str, Any], rows: Sequence[TrialRow], answer: str | None = None
) -> dict[str, Any]:
    """Each setting's screen call and speedup, whether it trained, and why not.

    Args:
        screen: The screen's document.
        rows: The race's trials (only the settings it trained, and the infeasible ones).
        answer: The verdict's recommended setting.
    """
    trained = _trained(rows)
    names = _labels(screen, rows)
    entries = [
        {**e, "label": names.get(e["label"], e["label"])} for e in screen.get("settings", [])
    ]
    reference = next((e["label"] for e in entries if e["call"] == "reference"), None)
    ran = [e for e in entries if e["call"] == "racing" and tuple(e["setting"]) in trained]
    last = min(ran, key=lambda e: (e.get("speedup") or [0.0])[0], default=None)
    answered = answer not in (None, reference) and any(e["label"] == answer for e in ran)
    settings = []
    for entry in entries:
        done = tuple(entry["setting"]) in trained
        why = None
        if entry["call"] == "eliminated":
            why = f"out in the screen: slower than {reference} (round {entry['rounds']})"
        elif entry["call"] == "racing" and not done:
            why = NOT_TRAINED_ANSWER if answered or last is None else _ranked_below(last)
        settings.append({**entry, "trained": done, "not_trained": why})
    rates = {
        names.get(k, k): [_finite(v) for v in values]
        for k, values in screen.get("samples_per_sec", {}).items()
    }
    return {
        "rounds": max((len(v) for v in rates.values()), default=0),
        "wall_s": screen.get("wall_s", 0.0),
        "device": screen.get("device"),
        "threshold": screen.get("threshold"),
        "warmup_s": {names.get(k, k): v for k, v in screen.get("warmup_s", {}).items()},
        "groups": [[names.get(k, k) for k in group] for group in screen.get("groups", [])],
        "settings": settings,
        "failed": screen.get("failed"),
        # The rounds themselves: each setting's samples/s per counted round, the order
        # they trained in, and the steps timed per round.
        "samples_per_sec": rates,
        "orders": screen.get("orders", []),
        "steps": screen.get("steps"),
    }


def _labels(screen: Mapping[str, Any], rows: Sequence[TrialRow]) -> dict[str, str]:
    """The screen's labels as the verdict spells them (its matmul part from the trials)."""
    # As the verdict: every label shows matmul when a trial set it; else only a setting
    # that is not matmul highest (one the screen took out, say) shows its part.
    show = any(r.axes.get("matmul_precision") not in (None, "none") for r in rows) or None
    return {
        e["label"]: setting_label(*e["setting"], show_matmul=show)
        for e in screen.get("settings", [])
    }


def _ranked_below(last: Mapping[str, Any]) -> str:
    """Why a setting was not trained when the race's stop was not the answer in the end."""
    return f"not trained: ranked below {last['label']} in the screen, where the race stopped"


def _finite(value: Any) -> float | None:
    """A rate as JSON holds it: a round that could not be timed is ``null``, not NaN."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def compute_summary(
    rows: Sequence[TrialRow],
    devices_per_trial: float,
    planned: int,
    screen: Mapping[str, Any] | None = None,
    confirmation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A sweep's device-seconds by phase: screen, training, re-timing, and their total.

    A phase's device-seconds are its seconds times the devices it held: the screen and
    the re-timing hold one device; a trial ``devices_per_trial`` (its GPUs, or 1 on CPU).

    Args:
        rows: The trials that ran (Tune's ``time_total_s`` each).
        devices_per_trial: The devices one trial holds.
        planned: The trials the sweep's space holds (a race trains fewer).
        screen: A race's screen document.
        confirmation: The re-timing's document.
    """
    training = sum(float(r.metrics.get(TIME_TOTAL) or 0.0) for r in rows) * devices_per_trial
    phases = {
        "screen": float((screen or {}).get("wall_s", 0.0)),
        "training": training,
        "retiming": float((confirmation or {}).get("wall_s", 0.0)),
    }
    return {
        "device_s": {**phases, "total": sum(phases.values())},
        "devices_per_trial": devices_per_trial,
        "trials_planned": planned,
        "trials_run": len(rows),
        "trials_not_trained": max(0, planned - len(rows)),
    }


def race_text(race: Mapping[str, Any]) -> str:
    """The race's lines in the summary: the screen, who is out, who was not trained."""
    if race.get("failed"):
        return f"race: not screened ({race['failed']}): every setting trained, as in a grid"
    if not race["rounds"]:
        return "race: not screened (fewer than two feasible settings with the reference)"
    settings = race["settings"]
    out = [s for s in settings if s["call"] == "eliminated"]
    line = f"race: screened {sum(s['call'] != 'infeasible' for s in settings)} settings"
    line += f" in {race['rounds']} paired rounds ({race['wall_s']:.1f} s"
    line += f" on {race['device']})" if race.get("device") else ")"
    lines = [line]
    for entry in out:
        lines.append(f"race: {entry['label']}: {entry['not_trained']}{_speedup(entry)}")
    for entry in settings:
        if entry["call"] == "racing" and not entry["trained"]:
            lines.append(f"race: {entry['label']}: {entry['not_trained']}{_speedup(entry)}")
    trained = [s["label"] for s in settings if s["trained"]]
    lines.append(f"race: trained {', '.join(trained) or 'nothing'}")
    return "\n".join(lines)


def _speedup(entry: Mapping[str, Any]) -> str:
    found = entry.get("speedup")
    if not found:
        return ""
    value, low, high = found
    return f" ({value:.2f}x, 95% CI {low:.2f}-{high:.2f}x)"


def screen_metrics(race: Mapping[str, Any]) -> dict[str, list[float]]:
    """The screen as the parent run's metrics, per setting: its rounds and its speedup.

    ``race/<setting>/samples_per_sec`` (one value per round, its step), and
    ``race/<setting>/speedup`` with ``speedup_ci_low`` and ``speedup_ci_high``.
    """
    out = {}
    rates = race.get("samples_per_sec", {})
    for entry in race["settings"]:
        slug = entry["label"].replace(" + ", "_").replace(" ", "_")
        timed = [v for v in rates.get(entry["label"], []) if v is not None]
        if timed:
            out[f"race/{slug}/samples_per_sec"] = timed
        found = entry.get("speedup")
        if not found:
            continue
        for name, value in zip(
            ("speedup", "speedup_ci_low", "speedup_ci_high"), found, strict=True
        ):
            out[f"race/{slug}/{name}"] = [float(value)]
    return out


def compute_text(compute: Mapping[str, Any]) -> str:
    """The sweep's cost in one line: device-seconds by phase, and the trials not trained."""
    spent = compute["device_s"]
    line = f"compute: {spent['total']:.1f} device-s ("
    parts = [f"{name} {spent[name]:.1f}" for name in ("screen", "training", "retiming")]
    line += ", ".join(p for p in parts if not p.endswith(" 0.0")) + ")"
    skipped = compute["trials_not_trained"]
    if skipped:
        line += f"; {skipped} of {compute['trials_planned']} trials not trained"
    return line
