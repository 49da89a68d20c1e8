"""Why the trial with the best objective is not the answer, in one line.

The answer is the fastest setting no worse than the reference
(:mod:`~versatil.sweep.results.verdict`), so the trial with the best objective is often
another: a setting no faster than the reference, a slower or more complex setting than
the recommended one, or a trial whose configuration's mean over seeds is not the best.
The summary says which, so that its ``best:`` line, its ``*`` mark and its
"Recommended:" sentence read as one answer.
"""

from __future__ import annotations

from versatil.sweep.results.answer import SettingResult, Verdict
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.verdict import setting_of

__all__ = ["answer_note"]


def answer_note(verdict: Verdict, answer: TrialRow | None, other: TrialRow | None) -> str:
    """Why ``other`` (the best objective's trial) is not ``answer`` (the recommended one).

    Args:
        verdict: The sweep's verdict.
        answer: The recommended trial.
        other: The trial with the best objective, when it is not ``answer``.

    Returns:
        One line, or ``""`` when there is nothing to explain.
    """
    if answer is None or other is None or answer.trial_id == other.trial_id:
        return ""
    by_setting = {r.setting: r for r in verdict.settings}
    chosen = by_setting.get(setting_of(answer.axes))
    mine = by_setting.get(setting_of(other.axes))
    if chosen is None or mine is None or verdict.reference is None:
        return ""
    metric = verdict.metric
    head = (
        f"best {metric}: {other.trial_id} ({mine.label}, {metric}={float(other.objective):.4g}), "  # type: ignore[arg-type]
        f"not the answer: "
    )
    return head + _reason(verdict, chosen, mine) + "."


def _reason(verdict: Verdict, chosen: SettingResult, mine: SettingResult) -> str:
    reference = verdict.reference
    assert reference is not None
    if mine is chosen:
        return (
            f"the answer is the best trial of {chosen.label}'s best configuration, whose mean "
            f"{verdict.metric} over seeds is the best"
        )
    if mine is reference:
        return (
            f"{chosen.label} is faster ({_ratio(chosen)} {reference.label}) and its "
            f"{verdict.metric} is no worse, within the {verdict.tolerance:.1%} tolerance"
        )
    if mine.speed_call != "faster":
        called = {"tie": "a tie", "unmeasured": "unmeasured", "shared": "timed on a shared GPU"}
        return (
            f"{mine.label} is not faster than {reference.label} beyond noise "
            f"({called.get(mine.speed_call, mine.speed_call)}), and the answer is the fastest "
            f"setting no worse than {reference.label}"
        )
    if not mine.no_worse:
        return f"{mine.label}'s {verdict.metric} is not shown no worse than {reference.label}'s"
    if mine.label in verdict.tied:
        return f"{chosen.label} is tied with it on speed, within noise, and simpler"
    return (
        f"{chosen.label} is faster ({_ratio(chosen)} {reference.label}, against "
        f"{_ratio(mine)}), and both are no worse than {reference.label}"
    )


def _ratio(result: SettingResult) -> str:
    if result.speedup is None:
        return "unmeasured against"
    return f"{result.speedup.value:.2f}x"
