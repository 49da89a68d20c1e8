"""A sweep's plan: the sweep file read once, into everything the phases after it need.

:func:`~versatil.sweep.config.planning.make_plan` makes it from the validated sweep file
while the sweep prepares; the phases after that (connect, screen, train, conclude, end)
and the workers read the plan, never the file. ``--dry-run`` prints it
(:meth:`Plan.lines`); the sweep's parent MLflow run and its experiment directory keep
it as ``plan.json`` (:meth:`Plan.as_dict`), and a resume says what changed since
(:meth:`Plan.changes`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from versatil.sweep.plan.records import (
    Budget,
    Objectives,
    Reference,
    Resources,
    Retiming,
    Scheduler,
    Search,
    Where,
)
from versatil.sweep.plan.trial import TrialPlan

__all__ = ["Plan"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sweep runs, chosen once before anything starts.

    Attributes:
        name: The sweep's name (Tune's experiment name starts with it).
        space: Each axis: a settings axis's values (a tuple), a sampled task-param axis
            (:class:`~versatil.sweep.plan.records.Sampled`), or a fixed value.
        axis_names: The axes a trial's config holds: the space's, and ``seed`` with
            replicates.
        trials: Every trial the sweep may run, in the order they start; a sampled axis
            of a grid sweep shows as its distribution (``loguniform(0.001, 0.1)``).
        points: The same trials with every sampled axis drawn: the points a grid with
            replicates, or a race, gives Tune.
        grid: A grid sweep's combinations of its grid axes, in the order they start.
        first: The configuration a random or Optuna sweep suggests first (the
            reference's), or ``None``.
        tune_samples: Tune's ``num_samples``.
        reference: The setting every other is compared with, and how it was chosen.
        search: How the space is searched.
        scheduler: FIFO, ASHA or PBT, and what it compares.
        budget: How long each trial trains.
        resources: What a trial holds, and the re-timing.
        objectives: What the trials are judged on.
        retiming: The end's re-timing of the settings in contention.
        trial: What each trial's worker needs.
        where: Where results and runs go.
    """

    name: str
    space: Mapping[str, Any]
    axis_names: tuple[str, ...]
    trials: tuple[Mapping[str, Any], ...]
    points: tuple[Mapping[str, Any], ...]
    grid: tuple[Mapping[str, Any], ...]
    first: Mapping[str, Any] | None
    tune_samples: int
    reference: Reference
    search: Search
    scheduler: Scheduler
    budget: Budget
    resources: Resources
    objectives: Objectives
    retiming: Retiming
    trial: TrialPlan
    where: Where

    @property
    def planned_trials(self) -> int:
        """The trials the space holds (a race trains fewer, never more)."""
        return len(self.points) if self.search.algorithm == "race" else self.tune_samples

    def with_tracking(self, tracking_uri: str) -> Plan:
        """This plan with the MLflow store prepare chose."""
        where = dataclasses.replace(self.where, tracking_uri=tracking_uri)
        return dataclasses.replace(self, where=where)

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain JSON values (``plan.json``)."""
        return json.loads(json.dumps(dataclasses.asdict(self), default=str))

    def changes(self, earlier: Mapping[str, Any]) -> list[str]:
        """What differs from an ``earlier`` plan's :meth:`as_dict`, one line per field.

        A field is a record's member (``search.algorithm``); lists are compared whole and
        said by their lengths when those differ (``trials: 16 -> 12 entries``).
        """
        before, now = _flat(earlier), _flat(self.as_dict())
        lines = []
        for key in sorted(set(before) | set(now)):
            old, new = before.get(key, "(none)"), now.get(key, "(none)")
            if old == new:
                continue
            if isinstance(old, list) and isinstance(new, list) and len(old) != len(new):
                lines.append(f"{key}: {len(old)} -> {len(new)} entries")
            else:
                lines.append(f"{key}: {_short(old)} -> {_short(new)}")
        return lines

    def opening(self, address: str | None) -> str:
        """The line a sweep prints as it starts, before Ray and the first result.

        A first epoch may take minutes: the line says what is coming meanwhile.

        Args:
            address: The Ray cluster the sweep connects to; ``None``: a local Ray.
        """
        at_once = self.resources.max_concurrent_trials
        concurrency = f"at most {at_once} at once" if at_once else "as many at once as fit"
        ray = f"connecting to Ray at {address}" if address else "starting Ray"
        return (
            f"sweep {self.name!r}: {self.planned_trials} trials, {concurrency}, "
            f"{self.budget.counted} each; {ray}"
        )

    def lines(self) -> list[str]:
        """The plan in a few lines, as ``--dry-run`` prints it."""
        objectives = ", ".join(f"{m} ({mode})" for m, mode in self.objectives.objectives)
        resources, search = self.resources, self.search
        per_trial = f"{resources.cpu:g} CPU, {resources.gpus:g} GPU"
        if resources.distributed:
            per_trial += f", each of {resources.workers_per_trial} workers"
        retime = resources.retime
        reference = ", ".join(f"{k}={v}" for k, v in self.reference.settings.items()) or "-"
        scheduler = self.scheduler.type
        if scheduler != "fifo":
            scheduler += f" on {self.scheduler.metric} ({self.scheduler.mode})"
        lines = [
            f"reference: {reference} ({self.reference.chosen})",
            f"search: {search.algorithm}, {self.planned_trials} trials, "
            f"seeds {', '.join(map(str, search.seeds))}; scheduler: {scheduler}",
            f"budget: {self.budget.counted} per trial",
            f"resources: {per_trial} per trial ({resources.accelerator}); re-timing "
            f"{retime['num_cpus']:g} CPU, {retime['num_gpus']:g} GPU",
            f"objectives: {objectives}, tolerance {self.objectives.tolerance:g}",
            f"re-timing: {self.retiming.enabled}, {self.retiming.rounds} rounds",
            f"storage: {self.where.storage_path}; MLflow experiment {self.where.experiment!r}",
        ]
        if search.race is not None:
            race = search.race
            lines.append(f"race: alpha {race.alpha:g}, at most {race.rounds} rounds")
        return lines


def _flat(document: Mapping[str, Any]) -> dict[str, Any]:
    """A plan's dict one level down: ``{"search.algorithm": "grid", ...}``."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, Mapping) and key not in ("space", "first"):
            for inner, item in value.items():
                flat[f"{key}.{inner}"] = item
        else:
            flat[key] = value
    return flat


def _short(value: Any) -> str:
    """A value as a change line shows it: JSON, cut to 80 characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
