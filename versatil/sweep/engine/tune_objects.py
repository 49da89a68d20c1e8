"""The Tune objects a sweep is made of: its searcher, scheduler, sample count and stopper."""

from __future__ import annotations

from typing import Any

from versatil.sweep.config.axes import NumericAxis
from versatil.sweep.config.reference import compares_settings, reference_settings
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.engine.space import (
    grid_points,
    numeric_domain,
    reference_point,
    replicate_points,
)
from versatil.sweep.vocab.keys import SEED
from versatil.sweep.vocab.report import TrialReport

__all__ = [
    "make_scheduler",
    "make_searcher",
    "num_samples",
    "objective_stopper",
    "planned_trials",
]


# Registries of lazy imports: a sweep that uses FIFO never imports optuna.
def make_searcher(config: SweepConfig) -> Any:
    """The sweep's searcher: Optuna, or Tune's generator for random and grid search.

    Optuna and random search suggest the reference first (:func:`reference_point`, given
    as Tune's ``points_to_evaluate``), so the sweep trains its baseline whatever the
    searcher's choices. With replicates, Optuna's suggestions are repeated by Tune's
    ``Repeater`` (Optuna sees each configuration's mean over its seeds), the reference's
    among them, and grid and random sweeps are given their trials as points, each
    configuration once per seed (:func:`replicate_points`).
    """
    first = reference_point(config)
    points = None if first is None else [first]
    if config.search.algorithm == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        searcher = OptunaSearch if config.replicates > 1 else _seeds_apart(config.trainer.seed)
        if config.objective.is_multi:  # Optuna's multi-objective sampler; not via TuneConfig
            metrics, modes = zip(*config.objective.objectives, strict=True)
            optuna = searcher(
                metric=list(metrics),
                mode=list(modes),
                seed=config.search.seed,
                points_to_evaluate=points,
            )
        else:
            optuna = searcher(seed=config.search.seed, points_to_evaluate=points)
        if config.replicates == 1:
            return optuna
        return _seeded_repeater(optuna, config.replicate_seeds())
    from ray.tune.search.basic_variant import BasicVariantGenerator

    # Tune ignores TuneConfig.max_concurrent_trials for a generator it is handed: the
    # generator itself takes the limit.
    limit = config.max_concurrent_trials or 0
    if config.replicates > 1:
        return BasicVariantGenerator(
            points_to_evaluate=replicate_points(config),
            random_state=config.search.seed,
            max_concurrent=limit,
        )
    if config.search.algorithm == "random":
        return BasicVariantGenerator(
            points_to_evaluate=points, random_state=config.search.seed, max_concurrent=limit
        )
    # Grid: every combination given as a point, in the order of grid_points (each
    # compiled graph first once, then its repeats); sampled axes are drawn per point.
    points = grid_points(config) * config.search.num_samples
    return BasicVariantGenerator(
        points_to_evaluate=points, random_state=config.search.seed, max_concurrent=limit
    )


def planned_trials(config: SweepConfig) -> int:
    """The trials the sweep's space holds: Tune's sample count (a race trains fewer)."""
    if config.search.algorithm == "race":
        return len(replicate_points(config))
    return num_samples(config)


def num_samples(config: SweepConfig) -> int:
    """Tune's ``num_samples``: a grid sweep's points each take one sample; times replicates."""
    if config.replicates > 1 and config.search.algorithm != "optuna":
        return len(replicate_points(config))
    if config.search.crosses_settings:
        return len(grid_points(config)) * config.search.num_samples
    return config.search.num_samples * config.replicates


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


def make_scheduler(config: SweepConfig) -> Any:
    """The sweep's trial scheduler (ASHA or PBT), or ``None`` for FIFO.

    Both keep the reference (:mod:`versatil.sweep.engine.keep_reference`): in a sweep that
    compares settings, the first configuration with the reference's settings trains its
    whole budget, never stopped early by ASHA nor exploited by PBT.
    """
    section = config.scheduler
    # One objective: TuneConfig passes it on. Several: the scheduler gets its own one.
    metric, mode = config.scheduler_objective
    own: dict[str, Any] = {"metric": metric, "mode": mode} if config.objective.is_multi else {}
    if section.type in ("asha", "pbt"):
        own["reference"] = reference_settings(config) if compares_settings(config) else None
    if section.type == "asha":
        from versatil.sweep.engine.keep_reference import KeepReferenceASHA

        return KeepReferenceASHA(
            time_attr="training_iteration",
            max_t=config.trainer.max_epochs,
            grace_period=section.grace_period,
            reduction_factor=section.reduction_factor,
            **own,
        )
    if section.type == "pbt":
        from versatil.sweep.engine.keep_reference import KeepReferencePBT

        return KeepReferencePBT(
            time_attr="training_iteration",
            perturbation_interval=section.perturbation_interval,
            hyperparam_mutations={
                name: numeric_domain(axis) if isinstance(axis, NumericAxis) else axis
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
            if TrialReport.from_dict(result).objective_missing:
                self.missing = True
            return self.missing

        def stop_all(self) -> bool:
            return self.missing

    return _Stopper()
