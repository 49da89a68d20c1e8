"""A sweep's rows judged: the answer's trial, the Pareto ranking, the verdict, the summary.

The driver (at the end of a sweep) and the report (read back from MLflow) both judge
rows here, so the console, the report and the MLflow tags say the same thing.

One answer: with one objective, the trial the summary calls best (``best:``, the ``*``
mark, the best checkpoint) is the verdict's recommended trial. When another trial has a
better objective, the summary says which and why it is not the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from versatil.sweep.results.answer import Setting
from versatil.sweep.results.answer_note import answer_note
from versatil.sweep.results.confirmation import confirmed_speedups
from versatil.sweep.results.pareto import Ranking, rank_rows
from versatil.sweep.results.ranking import best_on_front, best_row, pareto_marks, summary_marks
from versatil.sweep.results.replicates import replicate_tags, replicates_table
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.table import summary_table
from versatil.sweep.results.verdict import Verdict, make_verdict
from versatil.sweep.results.verdict_text import verdict_table
from versatil.sweep.vocab import tags

__all__ = ["Judgement", "judge", "summary_text"]


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What a sweep's rows say.

    Attributes:
        objectives: ``(metric, mode)`` of each objective, the primary first.
        best: The answer's trial: with one objective the recommended trial, else the best
            trial on the Pareto set.
        marks: ``*`` best, ``P`` Pareto, ``~`` within noise of the front, per trial id.
        ranking: The Pareto ranking, for a multi-objective sweep; else ``None``.
        verdict: Speeds against eager fp32 and the recommendation.
        rows: The rows judged.
        best_objective: The trial with the best primary objective, when it is not
            :attr:`best` (with one objective); else ``None``.
        pareto: The trial ids on the Pareto front of objective against throughput, with
            one objective; ``None`` to read the front from the marks.
    """

    objectives: list[tuple[str, str]]
    best: TrialRow | None
    marks: dict[str, str]
    ranking: Ranking | None
    verdict: Verdict
    rows: Sequence[TrialRow] = ()
    best_objective: TrialRow | None = None
    pareto: frozenset[str] | None = None

    @property
    def front(self) -> set[str]:
        """The trial ids on the Pareto front."""
        if self.pareto is not None:
            return set(self.pareto)
        return {t for t, mark in self.marks.items() if mark in ("*", "P")}

    def child_tags(self) -> dict[str, dict[str, str]]:
        """Per trial id: its objective over seeds (replicates) and its Pareto tags."""
        out = replicate_tags(self.rows)
        if self.ranking is None:
            return out
        ranking = self.ranking
        for t in ranking.left_out:
            out.setdefault(t, {})[tags.PARETO] = "false"
        for trial, place in ranking.rank.items():
            out.setdefault(trial, {}).update(
                {
                    tags.PARETO: str(ranking.level[trial] == 1).lower(),
                    tags.PARETO_RANK: str(place),
                    tags.PARETO_LEVEL: str(ranking.level[trial]),
                }
            )
        return out


def judge(
    rows: Sequence[TrialRow],
    objectives: Sequence[tuple[str, str]],
    tolerance: float,
    confirmation: Mapping[str, Any] | None = None,
    target: float | None = None,
    reference: Setting | None = None,
) -> Judgement:
    """Judges a sweep's rows by its objectives (see :mod:`~versatil.sweep.results.pareto`).

    Args:
        rows: The trials.
        objectives: ``(metric, mode)`` of each objective, the primary first.
        tolerance: The verdict's non-inferiority margin (relative).
        confirmation: The re-timing rounds' document, when the candidates were re-timed:
            their paired speedups decide the verdict.
        target: The objective the rows' time to target was measured to, if any.
        reference: The sweep's reference when its space has no eager fp32
            (:func:`~versatil.sweep.results.verdict.make_verdict`).
    """
    objectives = list(objectives)
    metric, mode = objectives[0]
    confirmed = confirmed_speedups(confirmation) if confirmation else None
    verdict = make_verdict(rows, metric, mode, tolerance, confirmed, target, reference)
    if len(objectives) == 1:
        return _one_answer(objectives, rows, verdict, tolerance)
    ranking = rank_rows(rows, objectives)
    best = best_on_front(rows, ranking)
    return Judgement(objectives, best, pareto_marks(rows, ranking), ranking, verdict, rows)


def _one_answer(
    objectives: list[tuple[str, str]],
    rows: Sequence[TrialRow],
    verdict: Verdict,
    tolerance: float,
) -> Judgement:
    """A single objective's judgement, whose best trial and ``*`` are the recommended trial."""
    mode = objectives[0][1]
    marks = summary_marks(rows, mode, tolerance)
    front = frozenset(t for t, mark in marks.items() if mark in ("*", "P"))
    best = best_row(rows, mode)
    answer = next((r for r in rows if r.trial_id == verdict.recommended), None) or best
    other = None
    if answer is not None and best is not None and answer.trial_id != best.trial_id:
        other = best
        marks[best.trial_id] = "P"  # the best objective's trial is on the front
        marks[answer.trial_id] = "*"
    return Judgement(objectives, answer, marks, None, verdict, rows, other, front)


def _note(judgement: Judgement) -> str:
    """Why the best objective's trial is not the answer, when it is another trial."""
    return answer_note(judgement.verdict, judgement.best, judgement.best_objective)


def _legend(judgement: Judgement) -> str:
    if judgement.ranking is None:
        legend = (
            "* the recommended trial, P other trials on the Pareto front "
            "(objective vs samples_per_sec)"
        )
        if "~" in judgement.marks.values():
            legend += (
                ", ~ within noise of it (no trial on the front beats it beyond the "
                "tolerance and the throughput intervals)"
            )
        return legend
    ranking = judgement.ranking
    names = ", ".join(f"{m} ({mode})" for m, mode in judgement.objectives)
    lines = [
        f"* best {judgement.objectives[0][0]} on the Pareto front, P the rest of the Pareto set "
        f"of {names}: {len(ranking.front)} of {len(ranking.order)} finished trials",
        "rank: non-domination level, then crowding distance, then samples_per_sec",
    ]
    stopped = [t for t, why in ranking.left_out.items() if why.startswith("stopped")]
    if stopped:
        lines.append(
            f"left out of the front: {len(stopped)} trial(s) stopped early by the scheduler "
            f"did not finish ({', '.join(sorted(stopped))})"
        )
    others = len(ranking.left_out) - len(stopped)
    if others:
        lines.append(f"left out of the front: {others} trial(s) that failed or were infeasible")
    return "\n".join(lines)


def summary_text(
    rows: Sequence[TrialRow], judgement: Judgement, sections: Sequence[str] = ()
) -> str:
    """The verdict, the table, its legend, further ``sections`` (empty ones skipped), speeds.

    Args:
        rows: The trials.
        judgement: What :func:`judge` made of them.
        sections: Text blocks shown after the legend, e.g. the INT8 runs of the trials.
    """
    metric = judgement.objectives[0][0]
    ranks = judgement.ranking.rank if judgement.ranking is not None else None
    others = [m for m, _ in judgement.objectives[1:]]
    table = summary_table(rows, metric, judgement.marks, other_objectives=others, ranks=ranks)
    legend = "\n".join(p for p in (_legend(judgement), _note(judgement)) if p)
    parts = [judgement.verdict.text, table, legend, replicates_table(rows, metric)]
    parts = [p for p in (*parts, *sections) if p]
    speeds = verdict_table(judgement.verdict)
    if speeds:
        parts.append(speeds)
    return "\n\n".join(parts)
