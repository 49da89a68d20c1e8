"""The verdict in words and as a table: every speed with its interval, ties said as ties."""

from __future__ import annotations

from versatil.stats import CONFIDENCE, POWER, Estimate
from versatil.sweep.results.answer import SettingResult, Verdict
from versatil.sweep.results.compile_cost import compile_cell, compile_note, compile_notes
from versatil.sweep.results.noninferiority import NO_WORSE, UNDECIDED, WORSE
from versatil.training.metric_names import (
    CEILING_FRACTION,
    JOULES_PER_SAMPLE,
    MFU,
    SAMPLES_PER_SEC,
    TFLOPS,
)

__all__ = ["SHARED_NOTE", "call_text", "percent", "ratio_text", "verdict_table", "verdict_text"]


def percent(change: float) -> str:
    """A relative change as a signed percentage: ``+30.0%``, ``+0.4%``, ``+0.18%``, ``-0.00%``."""
    value = 100 * change
    if abs(value) >= 1:
        return f"{value:+.1f}%"
    return f"{value:+.2g}%" if abs(value) >= 0.01 else f"{value:+.2f}%"


def _magnitude(change: float) -> str:
    return percent(change).lstrip("+-")


def ci_text(speedup: Estimate, rounds: int = 0) -> str:
    """``95% CI 1.80-2.00x, 6 paired rounds`` (or ``4 pairs`` of trials); ``no interval``.

    The level is the interval's real one where it falls short of 95%: a median over 4
    paired rounds covers 87.5% (``87.5% CI ...``; see :func:`~versatil.stats.median_ci`).
    """
    if not speedup.bounded:
        return "no interval"
    unit = f"{rounds} paired rounds" if rounds else f"{speedup.n} pairs"
    n = f", {unit}" if rounds or speedup.n > 1 else ""
    return f"{_level_text(speedup)} CI {speedup.low:.2f}-{speedup.high:.2f}x{n}"


def _level_text(estimate: Estimate) -> str:
    """``95%``, or the interval's coverage where it is lower: ``87.5%``, ``93.8%``."""
    if estimate.coverage >= CONFIDENCE:
        return f"{CONFIDENCE:.0%}"
    return f"{estimate.coverage:.1%}".replace(".0%", "%")


def ratio_text(result: SettingResult, against: str = "") -> str:
    """``1.90x eager fp32 (95% CI 1.80-2.00x, 6 paired rounds)``."""
    speedup = result.speedup
    assert speedup is not None
    return f"{speedup.value:.2f}x {against}".rstrip() + f" ({ci_text(speedup, result.rounds)})"


def _named(result: SettingResult) -> str:
    """The setting with its best configuration's params: ``bf16-mixed + eager (lr=0.01)``."""
    return f"{result.label} ({result.params})" if result.params else result.label


def _listed(result: SettingResult) -> str:
    """A setting in a list: ``32 + default, 0.97x, 95% CI 0.91-1.04x``."""
    speedup = result.speedup
    assert speedup is not None
    return f"{result.label}, {speedup.value:.2f}x, {ci_text(speedup, result.rounds)}"


def _time_to_target_cell(result: SettingResult) -> str:
    """``2.5`` (seconds), ``never``; with seeds, how many reached it: ``2.5 (2/3 seeds)``."""
    cell = "never" if result.time_to_target is None else f"{result.time_to_target:.3g}"
    if result.seeds > 1:
        cell += f" ({result.reached_target}/{result.seeds} seeds)"
    return cell


def call_text(result: SettingResult) -> str:
    """``no worse``, ``worse``, or ``undecided (7 seeds would decide it with 80% power)``."""
    if result.call != UNDECIDED or result.seeds_to_decide is None:
        return result.call
    n, power = result.seeds_to_decide, f"{POWER:.0%}"
    return f"{UNDECIDED} ({n} seeds would decide it with {power} power)"


def _objective_text(result: SettingResult, metric: str) -> str:
    """``val_loss +0.4% ± 1.2% over 3 seeds: no worse`` (``unpaired``, or ``one seed``)."""
    change = result.change
    if change is None:
        return f"{metric} {result.objective.value:.4g}"
    if change.bounded and result.seeds > 1:
        half = (change.high - change.low) / 2
        how = "" if result.paired else ", unpaired"
        text = f"{metric} {percent(change.value)} ± {_magnitude(half)} over {change.n} seeds{how}"
    else:
        text = f"{metric} {percent(change.value)} (one seed)"
    return f"{text}: {call_text(result)}"


def _left_unmeasured(verdict: Verdict) -> list[SettingResult]:
    """The no-worse or undecided settings left without a measured speed."""
    return [
        r
        for r in verdict.settings[1:]
        if r.call in (NO_WORSE, UNDECIDED) and r.speed_call in ("unmeasured", "shared")
    ]


def _unmeasured_note(left: list[SettingResult]) -> str:
    """``Left without a measured speed: bf16-true + eager (no worse, unmeasured). ``."""
    if not left:
        return ""
    named = ", ".join(f"{r.label} ({r.call}, {r.speed_call})" for r in left)
    return f"Left without a measured speed: {named}. "


def _against(verdict: Verdict) -> str:
    return "eager fp32" if verdict.is_baseline else verdict.reference.label  # type: ignore[union-attr]


def _closest(verdict: Verdict) -> SettingResult | None:
    measured = [r for r in verdict.settings[1:] if r.speedup is not None]
    if not measured:
        return None
    return max(measured, key=lambda r: (r.no_worse, r.speedup.value))  # type: ignore[union-attr]


def verdict_text(verdict: Verdict) -> str:
    """The verdict's sentence: the recommendation with its interval, or why none beat the rest."""
    ref = verdict.reference
    assert ref is not None
    against = _against(verdict)
    prefix = ""
    if verdict.listed_reference:
        prefix = (
            "This sweep's space has no eager fp32 baseline (precision 32, compile_mode none, "
            "matmul_precision highest), so settings are compared with its reference, "
            f"{ref.label} (each settings axis at its first listed value). "
        )
    elif not verdict.is_baseline:
        prefix = (
            "No eager fp32 baseline (precision 32, compile_mode none, matmul_precision "
            f"highest) finished in this sweep, so settings are compared with the slowest "
            f"finished setting, {ref.label}. "
        )
    chosen = next(r for r in verdict.settings if r.label == verdict.recommended_setting)
    left = _left_unmeasured(verdict)
    if chosen is not ref:
        text = (
            f"Recommended: {_named(chosen)}: {ratio_text(chosen, against)}; "  # type: ignore[arg-type]
            f"{_objective_text(chosen, verdict.metric)} (tolerance {verdict.tolerance:.1%})."
        )
        cost = compile_note(chosen)
        if cost:
            text = f"{text[:-1]}; it {cost}."
        if verdict.tied:
            others = [r for r in verdict.settings if r.label in verdict.tied[1:]]
            listed = "; ".join(_listed(r) for r in others)
            text += f" Tied with it on speed, within noise: {listed}; the simpler setting wins."
        return prefix + f"{text} {_unmeasured_note(left)}".rstrip()
    if all(r.speedup is None for r in verdict.settings[1:]):
        why = _unmeasured_text(verdict) + _unmeasured_note(left)
    else:
        why = _nothing_faster(verdict, against, left)
    itself = "the eager fp32 baseline" if verdict.is_baseline else "the reference"
    return f"{prefix}{why}Recommended: {_named(ref)}, {itself} (trial {ref.best_trial})."


def _nothing_faster(verdict: Verdict, against: str, left: list[SettingResult]) -> str:
    """Why the reference is recommended though some settings were measured.

    ``No setting beats`` only when every no-worse (or undecided) setting has a measured
    speed; else ``Nothing measured beats``, and the settings left unmeasured are named.
    """
    closest = _closest(verdict)
    lead = "Nothing measured beats" if left else "No setting beats"
    why = f"{lead} {against} beyond noise"
    if closest is not None:
        why += f" (closest: {_listed(closest)})"
    why += ". " + _unmeasured_note(left)
    metric = verdict.metric
    for heading, call in (("Faster but worse", WORSE), ("Faster but undecided", UNDECIDED)):
        found = [r for r in verdict.settings[1:] if r.speed_call == "faster" and r.call == call]
        if found:
            listed = " / ".join(f"{_listed(r)}, {_objective_text(r, metric)}" for r in found)
            why += f"{heading}: {listed}. "
    return why


SHARED_NOTE = (
    "shared: timed while trials shared a GPU (resources.gpu below 1; see device_trials_max "
    "on their runs), so not compared on speed; the end's re-timing, on a whole GPU, compares "
    "them"
)
"""The verdict table's note under a speed called ``shared``."""


def _unmeasured_text(verdict: Verdict) -> str:
    """Why no setting has a speedup: timed on a shared GPU, or timed too short."""
    if any(r.speed_call == "shared" for r in verdict.settings):
        return (
            "Throughput was timed while trials shared a GPU (resources.gpu below 1) and was "
            "not re-timed on a whole one, so settings are not compared on speed (see "
            "device_trials_max on their runs; confirm re-times them). "
        )
    return (
        "Throughput was not timed long enough to compare settings (a fit needs at least "
        "3 windows of training; see throughput_too_short on its run). "
    )


def _interval(estimate: Estimate | None, digits: int = 1) -> str:
    if estimate is None or not estimate.bounded:
        return "n/a"
    return f"{estimate.low:.{digits}f}-{estimate.high:.{digits}f}"


_HARDWARE_COLUMNS = {
    TFLOPS: "TFLOP/s",
    CEILING_FRACTION: "% ceiling",
    MFU: "MFU",
    JOULES_PER_SAMPLE: "J/sample",
}
"""The hardware columns of the verdict table; each shown when some setting reports it."""


def _hardware_cell(name: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if name in (CEILING_FRACTION, MFU):
        return f"{100 * value:.3g}%"
    return f"{value:.3g}"


def verdict_table(verdict: Verdict) -> str:
    """Each setting's speed and objective against the reference, with their intervals."""
    from versatil.tables import format_table

    if verdict.reference is None:
        return ""
    against = "eager fp32" if verdict.is_baseline else "slowest"
    if verdict.listed_reference:
        against = "reference"
    metric = verdict.metric
    shown = [n for n in _HARDWARE_COLUMNS if any(n in s.hardware for s in verdict.settings)]
    hardware_headers = [_HARDWARE_COLUMNS[n] for n in shown]
    compiled = any(s.compile is not None for s in verdict.settings)
    headers = [
        "setting",
        SAMPLES_PER_SEC,
        "95% CI",
        *hardware_headers,
        f"x {against}",
        "95% CI",
        "speed",
        *(["compile"] if compiled else []),
        f"{metric} (mean)",
        f"vs {against}",
        metric,
        "seeds",
        "trials",
    ]
    if verdict.target is not None:
        headers.append("time to target (s)")
    table = []
    for s in verdict.settings:
        change = s.change
        if s.speed_call == "reference":
            vs = "-"
        elif change is None:
            vs = "n/a"
        elif change.bounded and s.seeds > 1:
            vs = f"{percent(change.value)} ± {_magnitude((change.high - change.low) / 2)}"
            vs += "" if s.paired else " unpaired"
        else:
            vs = percent(change.value)
        table.append(
            [
                s.label,
                "n/a" if s.speed is None else f"{s.speed.value:.0f}",
                _interval(s.speed, 0),
                *(_hardware_cell(name, s.hardware.get(name)) for name in shown),
                "n/a" if s.speedup is None else f"{s.speedup.value:.2f}x",
                _interval(s.speedup, 2),
                s.speed_call,
                *([compile_cell(s.compile)] if compiled else []),
                f"{s.objective.value:.6g}",
                vs,
                s.call if s.seeds_to_decide is None else f"{s.call} (~{s.seeds_to_decide} seeds)",
                s.seeds,
                s.trials,
            ]
        )
        if verdict.target is not None:
            table[-1].append(_time_to_target_cell(s))
    text = format_table(headers, table)
    if any(s.speed_call == "shared" for s in verdict.settings):
        text += f"\n{SHARED_NOTE}"
    for note in compile_notes(verdict.settings):
        text += f"\ncompile, {note}"
    if verdict.target is not None:
        text += (
            f"\ntime to target: training seconds until {metric} first reached "
            f"{verdict.target:.6g} (within {verdict.tolerance:.1%})"
        )
    return text
