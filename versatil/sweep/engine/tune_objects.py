"""The Tune objects a sweep is made of: its searcher, scheduler, sample count and stopper."""

from __future__ import annotations

from typing import Any

from versatil.sweep.engine.space import numeric_domain
from versatil.sweep.plan import Plan, Sampled
from versatil.sweep.vocab.keys import SEED
from versatil.sweep.vocab.report import TrialReport

__all__ = [
    "make_scheduler",
    "make_searcher",
    "objective_stopper",
]


# Registries of lazy imports: a sweep that uses FIFO never imports optuna.
def make_searcher(plan: Plan) -> Any:
    """The sweep's searcher: Optuna, or Tune's generator for random and grid search.

    Optuna and random search suggest the reference first (the plan's ``first``, given as
    Tune's ``points_to_evaluate``), so the sweep trains its baseline whatever the
    searcher's choices. With replicates, Optuna's suggestions are repeated by Tune's
    ``Repeater`` (Optuna sees each configuration's mean over its seeds), the reference's
    among them, and grid and random sweeps are given their trials as points, each
    configuration once per seed (the plan's ``points``).
    """
    search, objectives = plan.search, plan.objectives
    points = None if plan.first is None else [dict(plan.first)]
    if search.algorithm == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        searcher = OptunaSearch if search.replicates > 1 else _seeds_apart(plan.trial.seed)
        if objectives.is_multi:  # Optuna's multi-objective sampler; not via TuneConfig
            metrics, modes = zip(*objectives.objectives, strict=True)
            optuna = searcher(
                metric=list(metrics),
                mode=list(modes),
                seed=search.seed,
                points_to_evaluate=points,
            )
        else:
            optuna = searcher(seed=search.seed, points_to_evaluate=points)
        if search.replicates == 1:
            return optuna
        return _seeded_repeater(optuna, list(search.seeds))
    from ray.tune.search.basic_variant import BasicVariantGenerator

    # Tune ignores TuneConfig.max_concurrent_trials for a generator it is handed: the
    # generator itself takes the limit.
    limit = plan.resources.max_concurrent_trials or 0
    if search.replicates > 1:
        return BasicVariantGenerator(
            points_to_evaluate=[dict(p) for p in plan.points],
            random_state=search.seed,
            max_concurrent=limit,
        )
    if search.algorithm == "random":
        return BasicVariantGenerator(
            points_to_evaluate=points, random_state=search.seed, max_concurrent=limit
        )
    # Grid: every combination given as a point, in the order of the plan's grid (each
    # compiled graph first once, then its repeats); sampled axes are drawn per point.
    points = [dict(p) for p in plan.grid] * search.num_samples
    return BasicVariantGenerator(
        points_to_evaluate=points, random_state=search.seed, max_concurrent=limit
    )


def _seeds_apart(base_seed: int) -> Any:
    """OptunaSearch whose repeated suggestions train with another seed: replicates, not rivals.

    A configuration Optuna suggests again gets ``seed`` ``base_seed + k`` for its ``k``-th
    repeat; the verdict then counts it among that configuration's seeds.
    """
    import json

    from ray.tune.search.optuna import OptunaSearch

    class SeedsApart(OptunaSearch):
        def suggest(self, trial_id: str) -> Any:
            config = super().suggest(trial_id)
            if isinstance(config, dict):
                seen = self.__dict__.setdefault("_versatil_seen", {})
                key = json.dumps(config, sort_keys=True, default=str)
                repeat = seen.get(key, 0)
                seen[key] = repeat + 1
                if repeat:
                    config = {**config, SEED: base_seed + repeat}
            return config

    return SeedsApart


def _seeded_repeater(searcher: Any, seeds: list[int]) -> Any:
    """Tune's ``Repeater`` around ``searcher``, each repeat's index turned into its seed."""
    from ray.tune.search import Repeater
    from ray.tune.search.repeater import TRIAL_INDEX

    class SeededRepeater(Repeater):
        def suggest(self, trial_id: str) -> Any:
            config = super().suggest(trial_id)
            if isinstance(config, dict) and TRIAL_INDEX in config:
                config = dict(config)
                config[SEED] = seeds[config.pop(TRIAL_INDEX)]
            return config

    return SeededRepeater(searcher, repeat=len(seeds), set_index=True)


def make_scheduler(plan: Plan) -> Any:
    """The sweep's trial scheduler (ASHA or PBT), or ``None`` for FIFO.

    Both keep the reference (:mod:`versatil.sweep.engine.keep_reference`): in a sweep that
    compares settings, the first configuration with the reference's settings trains its
    whole budget, never stopped early by ASHA nor exploited by PBT.
    """
    section = plan.scheduler
    # One objective: TuneConfig passes it on. Several: the scheduler gets its own one.
    own: dict[str, Any] = {}
    if plan.objectives.is_multi:
        own = {"metric": section.metric, "mode": section.mode}
    if section.type in ("asha", "pbt"):
        own["reference"] = dict(plan.reference.settings) if plan.reference.compares else None
    if section.type == "asha":
        from versatil.sweep.engine.keep_reference import KeepReferenceASHA

        return KeepReferenceASHA(
            time_attr=section.time_attr,
            max_t=section.max_t,
            grace_period=section.grace_period,
            reduction_factor=section.reduction_factor,
            **own,
        )
    if section.type == "pbt":
        from versatil.sweep.engine.keep_reference import KeepReferencePBT

        return KeepReferencePBT(
            time_attr=section.time_attr,
            perturbation_interval=section.perturbation_interval,
            hyperparam_mutations={
                name: numeric_domain(axis) if isinstance(axis, Sampled) else axis
                for name, axis in section.hyperparam_mutations.items()
            },
            quantile_fraction=section.quantile_fraction,
            synch=section.synch,
            **own,
        )
    return None


def objective_stopper() -> Any:
    """Stops the whole sweep at the first result saying the module never logged the objective.

    Every trial runs the same module, so the others would fail the same way: the trials
    still running end at once and the ones not started never start.
    """
    from ray import tune

    class _Stopper(tune.Stopper):
        def __init__(self) -> None:
            self.missing = False

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            if TrialReport.from_dict(result).stops_sweep:
                self.missing = True
            return self.missing

        def stop_all(self) -> bool:
            return self.missing

    return _Stopper()
