"""The race's training phase: a Tune searcher that trains settings in order of speed.

Its stages, from the screen's document (:mod:`~versatil.sweep.engine.race`):

1. the reference's trials (every configuration, with the sweep's replicates), the
   infeasible settings' (they end at once, with their reason), and the fastest tie
   group's trials, which train whatever the reference gives;
2. each further tie group's trials, in the screen's order of speed.

A setting's configurations run as the grid runs them, with the reference's seeds, so the
objective is compared paired by seed. Within a stage a configuration's first seed trains
first; a configuration whose first seed diverged is out (futility) and its other seeds
never start.
After each stage the trials so far are judged as the sweep's end would judge them
(:func:`~versatil.sweep.results.verdict.make_verdict`, with the screen's speedups): once
the recommended setting is not the reference, a setting faster than the reference beyond
noise passed the no-worse rule and the race stops. The eliminated settings and the
groups after the answer never train. While no trial of the reference has finished, the
race never stops on an answer (the verdict would compare with another setting).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from typing import Any

from ray.tune.search import Searcher

from versatil.stats import Estimate
from versatil.status import TrialStatus
from versatil.sweep.results.rows import TrialRow, make_row
from versatil.sweep.results.verdict import Setting, make_verdict, setting_of
from versatil.sweep.vocab.keys import EPOCH, SEED

__all__ = ["RaceSearcher"]


class RaceSearcher(Searcher):
    """Suggests the race's trials stage by stage, and stops at the answer.

    Args:
        stages: The trials' points, stage by stage
            (:func:`~versatil.sweep.engine.race.race_stages`).
        speedups: The screen's speedup of each setting over the reference.
        reference: The reference's setting.
        metric: The objective.
        mode: ``min`` or ``max``.
        tolerance: The no-worse rule's tolerance.
        axes: The sweep's axes, for the trials' rows.
        seeds: The replicates' seeds, the first first.
    """

    def __init__(
        self,
        stages: list[list[dict[str, Any]]],
        speedups: Mapping[Setting, Estimate],
        reference: Setting,
        metric: str,
        mode: str,
        tolerance: float,
        axes: Sequence[str],
        seeds: Sequence[int],
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.stages = stages
        self.speedups = dict(speedups)
        self.reference = reference
        self.tolerance = tolerance
        self.axes = list(axes)
        self.first_seed = seeds[0] if seeds else None
        self.stage = 0
        self.pending = list(stages[0]) if stages else []
        self.live: dict[str, dict[str, Any]] = {}
        self.rows: list[TrialRow] = []
        self.futile: set[str] = set()  # configurations out: their first seed diverged
        self.answer: str | None = None
        self.finished = not stages

    def _first_seed(self, point: Mapping[str, Any]) -> bool:
        return SEED not in point or point[SEED] == self.first_seed

    def _waits(self, point: Mapping[str, Any]) -> bool:
        """Whether a later seed's trial waits for its configuration's first seed to end."""
        if self._first_seed(point):
            return False
        mine = _configuration(point)
        waiting = [*self.pending, *self.live.values()]
        return any(_configuration(p) == mine and self._first_seed(p) for p in waiting)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The next trial of the stage, ``None`` to wait, or FINISHED at the answer."""
        if self.finished:
            return Searcher.FINISHED
        for index, point in enumerate(self.pending):
            if not self._waits(point):
                self.pending.pop(index)
                self.live[trial_id] = point
                return dict(point)
        return None

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Records the trial; after a stage's last trial, decides whether to go on."""
        point = self.live.pop(trial_id, None)
        if point is None:
            return
        metrics = dict(result or {})
        row = make_row(
            trial_id=trial_id,
            config=point,
            metrics=metrics,
            epochs=[metrics[EPOCH]] if EPOCH in metrics else [],
            axes=self.axes,
            objective=self.metric,
            error="errored" if error else None,
        )
        self.rows.append(row)
        mine = _configuration(point)
        if self._first_seed(point) and setting_of(point) != self.reference and _futile(row):
            self.futile.add(mine)
            self.pending = [p for p in self.pending if _configuration(p) != mine]
        if not self.pending and not self.live:
            self._decide()

    def _decide(self) -> None:
        """After a stage: stop at the answer, else the next stage (none left: stop)."""
        verdict = make_verdict(
            self.rows,
            self.metric,
            self.mode,
            self.tolerance,
            confirmed=self.speedups,
            reference=self.reference,
        )
        found = next((s for s in verdict.settings if s.label == verdict.recommended_setting), None)
        compared = verdict.reference is not None and verdict.reference.setting == self.reference
        if compared and found is not None and found.setting != self.reference:
            self.answer = found.label
            self.finished = True
            return
        self.stage += 1
        if self.stage >= len(self.stages):
            self.finished = True
            return
        self.pending = [p for p in self.stages[self.stage] if _configuration(p) not in self.futile]

    def save(self, checkpoint_path: str) -> None:
        """Tune saves the race's state with the experiment's, for ``--resume``."""
        with open(checkpoint_path, "wb") as handle:
            pickle.dump(self.__dict__, handle)

    def restore(self, checkpoint_path: str) -> None:
        """Reads the state :meth:`save` wrote; trials that were running run again."""
        with open(checkpoint_path, "rb") as handle:
            state = pickle.load(handle)
        self.__dict__.update(state)
        # Tune restarts the trials that were live, and their ends reach on_trial_complete.
        # A trial that had errored is already a row (the stage was decided with it): its
        # rerun (Tune's resume_errored) trains, and is not counted again here.


def _configuration(point: Mapping[str, Any]) -> str:
    """A point without its seed: one configuration, whatever replicate."""
    return repr(sorted((k, repr(v)) for k, v in point.items() if k != SEED))


def _futile(row: TrialRow) -> bool:
    """A first seed that diverged, or ended without a finite objective, rules its setting out."""
    if row.status == TrialStatus.DIVERGED:
        return True
    return row.status == TrialStatus.COMPLETED and row.objective is None
