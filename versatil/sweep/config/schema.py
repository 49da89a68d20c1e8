"""The sweep file schema: a typed SweepConfig, validated when it is loaded.

Every problem in a file is collected and raised once, as a :class:`ConfigError` whose lines
each name the field, the bad value and the valid choices. Loading imports neither torch nor
Lightning, so ``--dry-run`` and ``--help`` stay fast.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import pydantic

from versatil.errors import ConfigError, did_you_mean
from versatil.stats import EliminationRule
from versatil.sweep.config.axes import ENUM_AXES, is_grid, parse_axis
from versatil.sweep.config.limits import check_name
from versatil.sweep.config.post_training import PostTrainingSection
from versatil.sweep.config.runtime_env import RuntimeEnvSection
from versatil.sweep.config.sections import (
    ConfirmSection,
    MlflowSection,
    ObjectiveSection,
    ResourcesSection,
    SchedulerSection,
    SearchSection,
    TaskSection,
    TrainerSection,
)
from versatil.sweep.storage import Location, Storage, parse_location
from versatil.sweep.vocab.keys import SEED

__all__ = ["SweepConfig"]


class SweepConfig(pydantic.BaseModel):
    """A sweep: a task, an objective, a space of settings and params, and how to search it."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(
        description="The sweep's name: Tune experiment and MLflow experiment."
    )
    task: TaskSection = pydantic.Field(default_factory=TaskSection)
    objective: ObjectiveSection = pydantic.Field(default_factory=ObjectiveSection)
    space: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description="Axes: precision/compile_mode/matmul_precision (enum axes) and task params.",
    )
    search: SearchSection = pydantic.Field(default_factory=SearchSection)
    replicates: int = pydantic.Field(
        1,
        ge=1,
        le=100,
        description="Seeds per configuration: each trains with trainer.seed, trainer.seed+1, "
        "...; the objective is then a mean with its interval over seeds.",
    )
    scheduler: SchedulerSection = pydantic.Field(default_factory=SchedulerSection)
    resources: ResourcesSection = pydantic.Field(default_factory=ResourcesSection)
    max_concurrent_trials: int | None = pydantic.Field(
        None, ge=1, description="Trials at once; default: as many as resources allow."
    )
    max_failures: int = pydantic.Field(1, ge=0, description="Retries of a trial that crashes.")
    on_unreadable_checkpoint: Literal["previous", "restart", "fail"] = pydantic.Field(
        "previous",
        description="A restored trial whose newest checkpoint cannot be read resumes from "
        "its newest readable earlier one (previous), starts over (restart), or fails.",
    )
    trainer: TrainerSection = pydantic.Field(default_factory=TrainerSection)
    storage_path: str = pydantic.Field("runs/sweeps", description="Where Tune keeps results.")
    mlflow: MlflowSection = pydantic.Field(default_factory=MlflowSection)
    runtime_env: RuntimeEnvSection = pydantic.Field(
        default_factory=RuntimeEnvSection,
        description="Ray's runtime_env for the trials: code of your own to ship (working_dir, "
        "py_modules), what to leave out (excludes), pip packages and env_vars.",
    )
    confirm: ConfirmSection = pydantic.Field(
        default_factory=ConfirmSection,
        description="After the sweep: re-time the settings in contention, paired and "
        "interleaved; their rounds decide the verdict.",
    )
    post_training: PostTrainingSection = pydantic.Field(
        default_factory=PostTrainingSection,
        description="After the sweep: compress its winners to INT8 (as `compress` does).",
    )

    @pydantic.field_validator("name", mode="after")
    @classmethod
    def _check_name(cls, name: str) -> str:
        return check_name("name", name)

    @pydantic.field_validator("storage_path", mode="after")
    @classmethod
    def _check_storage_path(cls, path: str) -> str:
        parse_location("storage_path", path)
        return path

    @pydantic.field_validator("space", mode="after")
    @classmethod
    def _parse_space(cls, space: dict[str, Any]) -> dict[str, Any]:
        errors: list[str] = []
        parsed: dict[str, Any] = {}
        for name, raw in space.items():
            try:
                parsed[name] = parse_axis(name, raw)
            except ConfigError as error:
                errors.append(str(error))
        if errors:
            raise ValueError("; ".join(errors))
        return parsed

    @pydantic.model_validator(mode="after")
    def _cross_field(self) -> SweepConfig:
        errors = self.resources.accelerator_errors(self.trainer.accelerator)
        grid_axes = [n for n, a in self.space.items() if is_grid(a)]
        if self.search.algorithm == "optuna" and grid_axes:
            errors.append(
                f"search.algorithm: 'optuna' cannot sample grid axes ({', '.join(grid_axes)}); "
                "use choice for them or algorithm grid/random"
            )
        if self.scheduler.type == "pbt":
            errors += self._mutation_errors()
        errors += self._scheduler_metric_errors()
        if self.replicates > 1 and SEED in self.space:
            errors.append(
                f"replicates: {self.replicates} seeds each configuration itself, and the space "
                f"also has an axis {SEED!r}; remove one of them"
            )
        if self.replicates > 1 and self.scheduler.type == "pbt":
            errors.append(
                f"replicates: {self.replicates} cannot replicate PBT's trials, whose params "
                "change mid-trial; use 1, or scheduler fifo or asha"
            )
        if self.resources.workers_per_trial > 1 and self.scheduler.type == "pbt":
            errors.append("resources.workers_per_trial: PBT runs single-worker trials; use 1")
        if self.search.algorithm == "race":
            errors += self._race_errors()
        amount, unit = self.trainer.budget
        if unit != "epochs" and self.scheduler.type != "fifo":
            errors.append(
                f"scheduler.type: {self.scheduler.type!r} compares trials at epoch ends, and "
                f"trainer.max_{unit} budgets them in {unit} ({amount}); use scheduler fifo, "
                "or a budget in epochs (trainer.max_epochs)"
            )
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def _race_errors(self) -> list[str]:
        """A race screens settings and recommends on one objective, with trials it orders."""
        errors = []
        settings = [n for n in ENUM_AXES if n in self.space and len(self.space[n]) > 1]
        if not settings:
            errors.append(
                "search.algorithm: 'race' screens settings against each other, and the space "
                "holds one setting; list two or more values of precision, compile_mode or "
                "matmul_precision, or use algorithm grid"
            )
        if self.objective.is_multi:
            errors.append(
                "search.algorithm: 'race' stops at the first setting faster and no worse on "
                "one objective, and the sweep has several; use one objective, or algorithm grid"
            )
        if self.scheduler.type == "pbt":
            errors.append(
                "search.algorithm: 'race' trains each setting's own trials in speed order, "
                "which PBT's exploits would mix; use scheduler fifo or asha"
            )
        if self.resources.workers_per_trial > 1:
            errors.append(
                "search.algorithm: 'race' screens on one device, and resources."
                "workers_per_trial is more than 1; use 1, or algorithm grid"
            )
        race = self.search.race
        contenders = math.prod(len(self.space[n]) for n in settings) - 1 if settings else 0
        if contenders >= 1:
            needed = EliminationRule(race.alpha, contenders).straight_losses
            if race.rounds < needed:
                errors.append(
                    f"search.race.rounds: {race.rounds} cannot eliminate any setting: with "
                    f"{contenders} settings raced against the reference at alpha "
                    f"{race.alpha:g}, the rule needs {needed} straight losing rounds; use at "
                    f"least {needed}"
                )
        return errors

    def _scheduler_metric_errors(self) -> list[str]:
        """``scheduler.metric`` must be one of the objectives, for a scheduler that uses one."""
        metric = self.scheduler.metric
        names = [name for name, _ in self.objective.objectives]
        if metric is None:
            return []
        if self.scheduler.type == "fifo":
            return [f"scheduler.metric: {metric!r} is not used by scheduler fifo; remove it"]
        if metric not in names:
            return [
                f"scheduler.metric: {metric!r} is not an objective metric"
                f"{did_you_mean(metric, names)}; choose from {', '.join(names)}"
            ]
        return []

    @property
    def scheduler_objective(self) -> tuple[str, str]:
        """The ``(metric, mode)`` ASHA or PBT compares: ``scheduler.metric``, else the first."""
        modes = dict(self.objective.objectives)
        metric = self.scheduler.metric or self.objective.metric
        return metric, modes[metric]

    def _mutation_errors(self) -> list[str]:
        """PBT may mutate only what a trial's config holds: a task-param axis or task param."""
        errors = []
        known = sorted({*self.space, *self.task.params} - set(ENUM_AXES))
        for name in self.scheduler.hyperparam_mutations:
            field = f"scheduler.hyperparam_mutations.{name}"
            if name in ENUM_AXES:
                errors.append(
                    f"{field}: settings axes cannot be mutated mid-trial; mutate task params "
                    "such as lr"
                )
            elif name not in known:
                errors.append(
                    f"{field}: {name!r} is neither an axis of space nor a task param"
                    f"{did_you_mean(name, known)}; choose from {', '.join(known) or 'none'}"
                )
        return errors

    @property
    def axis_names(self) -> list[str]:
        """The axes a trial's config holds: the space's, and ``seed`` with replicates."""
        return [*self.space, SEED] if self.replicates > 1 else list(self.space)

    def replicate_seeds(self) -> list[int]:
        """The seeds each configuration trains with: ``trainer.seed`` onwards."""
        return [self.trainer.seed + i for i in range(self.replicates)]

    @property
    def experiment_name(self) -> str:
        """The MLflow experiment: ``mlflow.experiment`` or the sweep name."""
        return self.mlflow.experiment or self.name

    def location(self) -> Location:
        """The storage path: a local directory or object storage."""
        return parse_location("storage_path", self.storage_path)

    def storage(self) -> Storage:
        """The storage path as files versatil reads and writes."""
        return Storage(self.location())

    def storage_dir(self) -> Path:
        """The absolute storage path of a local (or shared) directory (Ray needs one).

        Raises:
            ValueError: when the storage path is on object storage.
        """
        return self.location().directory()
