"""The validated sweep file turned into its plan, once, while the sweep prepares.

Everything the phases after prepare derive from the file is derived here: the trials and
their order, the reference and how it was chosen, the resources of a trial and of the
re-timing, the budget, the search and the scheduler, the objectives, where results go.
"""

from __future__ import annotations

from typing import Any

from versatil.sweep.config.axes import ENUM_AXES, NumericAxis
from versatil.sweep.config.reference import compares_settings, reference_note, reference_settings
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.sections import DEFAULT_EPOCHS
from versatil.sweep.config.trials import expand_trials, grid_points, reference_point
from versatil.sweep.plan import (
    Budget,
    Objectives,
    Plan,
    Race,
    Reference,
    Resources,
    Retiming,
    Sampled,
    Scheduler,
    Search,
    TrialPlan,
    Where,
)
from versatil.training.spec import NONE, TrialSettings

__all__ = ["make_plan"]


def make_plan(config: SweepConfig, tracking_uri: str | None = None) -> Plan:
    """The plan of a validated sweep: what every phase after prepare reads.

    Args:
        config: The validated sweep.
        tracking_uri: The MLflow store prepare chose, if it chose one yet.
    """
    objectives = _objectives(config)
    resources = _resources(config)
    storage_path = _absolute(config)
    search = _search(config)
    points = expand_trials(config, draw=True)
    grid = grid_points(config) if search.crosses_settings else []
    return Plan(
        name=config.name,
        space={name: _axis(axis, name) for name, axis in config.space.items()},
        axis_names=tuple(config.axis_names),
        trials=tuple(expand_trials(config)),
        points=tuple(points),
        grid=tuple(grid),
        first=reference_point(config),
        tune_samples=_tune_samples(config, points, grid),
        reference=Reference(
            settings=reference_settings(config),
            compares=compares_settings(config),
            chosen=reference_note(config) or "eager fp32",
        ),
        search=search,
        scheduler=_scheduler(config),
        budget=Budget(
            amount=config.trainer.budget[0],
            unit=config.trainer.budget[1],
            max_epochs=config.trainer.epochs,
            options=config.trainer.options,
        ),
        resources=resources,
        objectives=objectives,
        retiming=Retiming(
            enabled=config.confirm.enabled,
            rounds=config.confirm.rounds,
            round_s=config.confirm.round_s,
            max_candidates=config.confirm.max_candidates,
            seed=config.trainer.seed,
        ),
        trial=_trial(config, resources, objectives, storage_path),
        where=Where(
            storage_path=storage_path,
            remote=config.location().remote,
            experiment=config.experiment_name,
            tracking_uri=tracking_uri,
            log_checkpoints=config.mlflow.log_checkpoints,
            register=config.mlflow.register,
        ),
    )


def _axis(axis: Any, name: str) -> Any:
    """A space's axis as the plan holds it: settings as a tuple, a sampled axis typed."""
    if name in ENUM_AXES:
        return tuple(axis)
    if isinstance(axis, NumericAxis):
        return Sampled(axis.kind, tuple(axis.args))
    return axis


def _objectives(config: SweepConfig) -> Objectives:
    section = config.objective
    return Objectives(
        objectives=tuple((metric, mode) for metric, mode in section.objectives),
        tolerance=section.tolerance,
        target=section.target,
        field="objective.metrics" if section.metrics else "objective.metric",
    )


def _resources(config: SweepConfig) -> Resources:
    section, accelerator = config.resources, config.trainer.accelerator
    return Resources(
        accelerator=accelerator,
        cpu=section.cpu,
        gpus=section.gpus_for(accelerator),
        workers_per_trial=section.workers_per_trial,
        max_concurrent_trials=config.max_concurrent_trials,
        max_failures=config.max_failures,
    )


def _search(config: SweepConfig) -> Search:
    section = config.search
    race = section.race if section.algorithm == "race" else None
    return Search(
        algorithm=section.algorithm,
        num_samples=section.num_samples,
        seed=section.seed,
        seeds=tuple(config.replicate_seeds()),
        race=None if race is None else Race(race.alpha, race.rounds, race.round_s),
    )


def _tune_samples(config: SweepConfig, points: list[Any], grid: list[Any]) -> int:
    """Tune's ``num_samples``: a grid sweep's points each take one sample; times replicates."""
    if config.replicates > 1 and config.search.algorithm != "optuna":
        return len(points)
    if config.search.crosses_settings:
        return len(grid) * config.search.num_samples
    return config.search.num_samples * config.replicates


def _scheduler(config: SweepConfig) -> Scheduler:
    section = config.scheduler
    metric, mode = config.scheduler_objective
    mutations = {
        name: Sampled(axis.kind, tuple(axis.args)) if isinstance(axis, NumericAxis) else axis
        for name, axis in section.hyperparam_mutations.items()
    }
    return Scheduler(
        type=section.type,
        metric=metric,
        mode=mode,
        max_t=config.trainer.epochs or DEFAULT_EPOCHS,
        grace_period=section.grace_period,
        reduction_factor=section.reduction_factor,
        perturbation_interval=section.perturbation_interval,
        hyperparam_mutations=mutations,
        synch=section.synch,
        quantile_fraction=section.quantile_fraction,
    )


def _trial(
    config: SweepConfig, resources: Resources, objectives: Objectives, storage_path: str
) -> TrialPlan:
    mutated = tuple(config.scheduler.hyperparam_mutations) if config.scheduler.type == "pbt" else ()
    return TrialPlan(
        task=config.task.spec,
        params=config.task.fixed_params,
        max_epochs=config.trainer.epochs,
        trainer=config.trainer.options,
        seed=config.trainer.seed,
        resources=resources,
        objectives=objectives,
        storage_path=storage_path,
        on_unreadable_checkpoint=config.on_unreadable_checkpoint,
        mutated=mutated,
        compile_cache=config.trainer.compile_cache,
        precisions=tuple(config.space.get("precision", [TrialSettings().precision.value])),
        matmuls=tuple(config.space.get("matmul_precision", [NONE])),
    )


def _absolute(config: SweepConfig) -> str:
    """The storage path as every process reads it: absolute, or the URI as given."""
    location = config.location()
    return location.value if location.remote else str(location.directory())
