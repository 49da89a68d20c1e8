"""The sweep file schema: a typed SweepConfig, validated when it is loaded.

Every problem in a file is collected and raised once, as a :class:`ConfigError` whose lines
each name the field, the bad value and the valid choices. Loading imports neither torch nor
Lightning, so ``--dry-run`` and ``--help`` stay fast.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic

from versatil.errors import ConfigError, describe_validation_error, did_you_mean
from versatil.sweep.config.post_training import PostTrainingSection
from versatil.sweep.config.sweep_file import check_plain_data, parse_yaml, read_text
from versatil.training.constants import PrecisionType
from versatil.training.settings import (
    SETTING_ENUMS,
    SettingsError,
    parse_accelerator,
    parse_setting,
)

__all__ = [
    "ENUM_AXES",
    "MAX_TRIALS",
    "NAME_RULE",
    "NUMERIC_KINDS",
    "EnumAxis",
    "NumericAxis",
    "SweepConfig",
    "apply_overrides",
    "check_name",
    "load_sweep",
]

NONE = "none"
"""The value of an optional enum axis that means "not set": eager, or torch's default."""

ENUM_AXES: dict[str, type[enum.StrEnum]] = SETTING_ENUMS
"""The settings axes, each drawn from its enum."""

NUMERIC_KINDS = ("choice", "grid", "uniform", "loguniform", "randint")

MAX_TRIALS = 10_000
"""The most trials a sweep may expand to (``--dry-run`` lists each one)."""

MAX_SEED = 2**32 - 1
"""The largest seed numpy, Optuna and Lightning accept (the smallest is 0)."""

NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100 characters"
)
"""What a sweep name or an MLflow experiment name may hold: it names directories."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(field: str, value: str) -> str:
    """Returns ``value`` when it follows :data:`NAME_RULE`.

    Raises:
        ConfigError: naming the field, the value and the rule.
    """
    if not _NAME.fullmatch(value):
        raise ConfigError(f"{field}: {value!r} is not a valid name: use {NAME_RULE}")
    return value


def axis_choices(name: str) -> list[str]:
    """Every value an enum axis can take in a sweep.

    ``all`` means exactly these: the precisions valid for training (INT8 is not), every
    compile mode plus ``none`` (eager), and every matmul precision.
    """
    enum_type = ENUM_AXES[name]
    values = [m.value for m in enum_type if m is not PrecisionType.INT8]
    return [NONE, *values] if name == "compile_mode" else values


class EnumAxis(pydantic.BaseModel):
    """An enum axis: ``all``, a list of values, or ``{values: all, exclude: [...]}``.

    Values are parsed by :func:`~versatil.training.settings.parse_setting`, as everywhere
    else: Lightning's aliases (``bf16``, ``32-true``, ...) are accepted.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    values: list[Any] | Literal["all"] = "all"
    exclude: list[Any] = []

    def resolve(self, name: str) -> list[str]:
        """The axis's canonical values, without duplicates and ``exclude``.

        ``all`` is in enum order; listed values keep their order.

        Raises:
            ConfigError: naming each value that is not valid for training.
        """
        valid = axis_choices(name)
        listed = [] if self.values == "all" else self.values
        errors: list[str] = []
        chosen = [_enum_value(name, v, errors) for v in listed]
        excluded = {_enum_value(name, v, errors) for v in self.exclude}
        if errors:
            raise ConfigError("; ".join(errors))
        values = valid if self.values == "all" else list(dict.fromkeys(chosen))
        return [v for v in values if v not in excluded]


def _enum_value(name: str, value: Any, errors: list[str]) -> str:
    """The canonical value of an enum axis's ``value``; appends to ``errors`` if invalid."""
    valid = axis_choices(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # YAML reads 32 and 64 as numbers
    try:
        member = parse_setting(name, value)
    except SettingsError:
        canonical = None
    else:
        canonical = NONE if member is None else member.value
    if canonical not in valid:
        kind = ENUM_AXES[name].__name__
        errors.append(
            f"space.{name}: {value!r} is not a {kind} valid for training; "
            f"choose from {', '.join(valid)}"
        )
        return str(value)
    return canonical


class NumericAxis(pydantic.BaseModel):
    """A numeric (or categorical) task-param axis: exactly one of the kinds below.

    ``choice``/``grid`` take a list of values; ``uniform``, ``loguniform`` and ``randint``
    take ``[low, high]``.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    choice: list[Any] | None = None
    grid: list[Any] | None = None
    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    randint: tuple[int, int] | None = None

    @pydantic.model_validator(mode="after")
    def _exactly_one(self) -> NumericAxis:
        given = [kind for kind in NUMERIC_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(NUMERIC_KINDS)}; got {given or 'none'}"
            )
        low_high = getattr(self, given[0])
        if given[0] in ("uniform", "loguniform", "randint") and not low_high[0] < low_high[1]:
            raise ValueError(f"{given[0]} needs low < high; got {list(low_high)}")
        if given[0] == "loguniform" and low_high[0] <= 0:
            raise ValueError(f"loguniform needs low > 0; got {list(low_high)}")
        if given[0] in ("choice", "grid") and not low_high:
            raise ValueError(f"{given[0]} needs at least one value")
        return self

    @property
    def kind(self) -> str:
        """Which of :data:`NUMERIC_KINDS` this axis is."""
        return next(kind for kind in NUMERIC_KINDS if getattr(self, kind) is not None)

    @property
    def args(self) -> Any:
        """The values (or bounds) of the axis."""
        return getattr(self, self.kind)


class TaskSection(pydantic.BaseModel):
    """Which task the trials train, and its fixed params."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field("reaching", description="Built-in task or 'package.module:factory'.")
    params: dict[str, Any] = pydantic.Field(default_factory=dict, description="Fixed task params.")


class ObjectiveSection(pydantic.BaseModel):
    """What trials are ranked by: one metric (``metric``, ``mode``) or several (``metrics``).

    ``metrics`` maps each metric to its mode, the first being the primary objective (the
    verdict's, and the default of ``scheduler.metric``); ``metric`` and ``mode`` then read
    as that first one.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    metric: str = pydantic.Field("val_loss", description="A metric the task logs each epoch.")
    mode: Literal["min", "max"] = pydantic.Field("min", description="min or max.")
    metrics: dict[str, Literal["min", "max"]] | None = pydantic.Field(
        None, description="Several objectives, each with its mode: {val_loss: min, ...}."
    )
    tolerance: float = pydantic.Field(
        0.01, ge=0, description="Verdict: how far from the best objective counts as as good."
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _primary_from_metrics(cls, data: Any) -> Any:
        metrics = data.get("metrics") if isinstance(data, Mapping) else None
        if not isinstance(metrics, Mapping):
            return data
        if not metrics:
            raise ValueError("objective.metrics: {} names no metric; give at least one")
        name, mode = next(iter(metrics.items()))
        if not (isinstance(name, str) and mode in ("min", "max")):
            return data  # the field's own validation names the bad entry
        for field, first in (("metric", name), ("mode", mode)):
            if field in data and data[field] != first:
                raise ValueError(
                    f"objective.{field}: {data[field]!r} is not the first of objective.metrics "
                    f"({name}: {mode}); give metric and mode for one objective, or metrics "
                    "for several"
                )
        return {**data, "metric": name, "mode": mode}

    @property
    def objectives(self) -> list[tuple[str, str]]:
        """Every objective as ``(metric, mode)``, the primary first."""
        return list(self.metrics.items()) if self.metrics else [(self.metric, self.mode)]

    @property
    def is_multi(self) -> bool:
        """Whether the sweep has several objectives (a Pareto front, not one best)."""
        return len(self.objectives) > 1


class SearchSection(pydantic.BaseModel):
    """How trials are drawn from the space."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    algorithm: Literal["grid", "random", "optuna"] = pydantic.Field(
        "grid", description="grid: the full cross product; random; optuna: TPE."
    )
    num_samples: int = pydantic.Field(
        1, ge=1, description="Trials to sample (random, optuna), or repeats of the grid."
    )
    seed: int | None = pydantic.Field(0, description="Seed of the search algorithm.")


class SchedulerSection(pydantic.BaseModel):
    """When trials stop early or exploit each other."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    type: Literal["fifo", "asha", "pbt"] = pydantic.Field("fifo", description="fifo, asha or pbt.")
    metric: str | None = pydantic.Field(
        None, description="ASHA, PBT: the objective metric they compare; default the first."
    )
    grace_period: int = pydantic.Field(1, ge=1, description="ASHA: epochs before a trial may stop.")
    reduction_factor: float = pydantic.Field(2.0, gt=1, description="ASHA: halving rate.")
    perturbation_interval: int = pydantic.Field(
        1, ge=1, description="PBT: epochs between exploits."
    )
    hyperparam_mutations: dict[str, NumericAxis] = pydantic.Field(
        default_factory=dict, description="PBT: the task params it may mutate, and their ranges."
    )
    synch: bool = pydantic.Field(
        False, description="PBT: perturb only when every trial reached the interval."
    )
    quantile_fraction: float = pydantic.Field(
        0.25, gt=0, le=0.5, description="PBT: top/bottom share."
    )


class ResourcesSection(pydantic.BaseModel):
    """What one trial gets."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cpu: float = pydantic.Field(1, gt=0, description="CPUs per trial (per worker).")
    gpu: float = pydantic.Field(
        0, ge=0, description="GPUs per trial (per worker); fractions share a GPU."
    )
    workers_per_trial: int = pydantic.Field(
        1, ge=1, description="Data-parallel Lightning workers per trial (Ray Train, DDP)."
    )


class TrainerSection(pydantic.BaseModel):
    """Lightning Trainer limits shared by every trial."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    max_epochs: int = pydantic.Field(3, ge=1, description="Epochs per trial.")
    accelerator: str = pydantic.Field(
        "auto", description="Lightning accelerator: auto, cpu, gpu, cuda, mps or tpu."
    )
    seed: int = pydantic.Field(0, description="Seed of every trial's fit.")
    compile_cache: bool = pydantic.Field(
        True,
        description="Compiled trials share their compiled graphs through the storage path.",
    )

    @pydantic.field_validator("accelerator", mode="before")
    @classmethod
    def _parse_accelerator(cls, value: Any) -> str:
        return parse_accelerator("accelerator", value)


class MlflowSection(pydantic.BaseModel):
    """Where trials are recorded."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    experiment: str | None = pydantic.Field(
        None, description="Experiment name; default: the sweep name."
    )
    tracking_uri: str | None = pydantic.Field(
        None, description="MLflow server URI; default: a SQLite file under the storage path."
    )
    log_checkpoints: Literal["best", "all", "none"] = pydantic.Field(
        "best", description="Which trials' checkpoints are logged as artifacts."
    )
    register_best: str | None = pydantic.Field(
        None, description="Register the best trial's checkpoint in the Model Registry as NAME."
    )

    @pydantic.field_validator("experiment", mode="after")
    @classmethod
    def _check_experiment(cls, experiment: str | None) -> str | None:
        return None if experiment is None else check_name("experiment", experiment)


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
    post_training: PostTrainingSection = pydantic.Field(
        default_factory=PostTrainingSection,
        description="After the sweep: compress its winners to INT8 (as `compress` does).",
    )

    @pydantic.field_validator("name", mode="after")
    @classmethod
    def _check_name(cls, name: str) -> str:
        return check_name("name", name)

    @pydantic.field_validator("space", mode="after")
    @classmethod
    def _parse_space(cls, space: dict[str, Any]) -> dict[str, Any]:
        errors: list[str] = []
        parsed: dict[str, Any] = {}
        for name, raw in space.items():
            try:
                parsed[name] = _parse_axis(name, raw)
            except ConfigError as error:
                errors.append(str(error))
        if errors:
            raise ValueError("; ".join(errors))
        return parsed

    @pydantic.model_validator(mode="after")
    def _cross_field(self) -> SweepConfig:
        errors = []
        grid_axes = [n for n, a in self.space.items() if _is_grid(a)]
        if self.search.algorithm == "optuna" and grid_axes:
            errors.append(
                f"search.algorithm: 'optuna' cannot sample grid axes ({', '.join(grid_axes)}); "
                "use choice for them or algorithm grid/random"
            )
        if self.scheduler.type == "pbt":
            errors += self._mutation_errors()
        errors += self._scheduler_metric_errors()
        if self.resources.workers_per_trial > 1 and self.scheduler.type == "pbt":
            errors.append("resources.workers_per_trial: PBT runs single-worker trials; use 1")
        if errors:
            raise ValueError("; ".join(errors))
        return self

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
    def experiment_name(self) -> str:
        """The MLflow experiment: ``mlflow.experiment`` or the sweep name."""
        return self.mlflow.experiment or self.name

    def storage_dir(self) -> Path:
        """The absolute storage path (Ray needs one)."""
        return Path(self.storage_path).expanduser().resolve()

    def compile_cache_dir(self) -> Path:
        """Where compiled trials share their compiled graphs: under the storage path."""
        return self.storage_dir() / ".compile_cache"


def _is_grid(axis: Any) -> bool:
    return isinstance(axis, NumericAxis) and axis.kind == "grid"


def _parse_axis(name: str, raw: Any) -> Any:
    """An enum axis (list of values), a NumericAxis, or a fixed value."""
    if name in ENUM_AXES:
        if isinstance(raw, Mapping):
            try:
                axis = EnumAxis.model_validate(raw)
            except pydantic.ValidationError as error:
                lines = describe_validation_error(error, f"space.{name}", model=EnumAxis)
                raise ConfigError("; ".join(lines)) from None
        elif raw == "all":
            axis = EnumAxis()
        elif isinstance(raw, list | str | int | float):
            axis = EnumAxis(values=raw if isinstance(raw, list) else [raw])
        else:
            raise ConfigError(f"space.{name}: {raw!r} is not 'all', a list or {{values, exclude}}")
        values = axis.resolve(name)
        if not values:
            raise ConfigError(f"space.{name}: no values left after exclude {axis.exclude}")
        return values
    if isinstance(raw, Mapping) and set(raw) & set(NUMERIC_KINDS):
        try:
            return NumericAxis.model_validate(raw)
        except pydantic.ValidationError as error:
            lines = describe_validation_error(error, f"space.{name}", fields=list(NUMERIC_KINDS))
            raise ConfigError("; ".join(lines)) from None
    if isinstance(raw, Mapping):
        raise ConfigError(
            f"space.{name}: {dict(raw)!r} is not an axis; use one of "
            f"{', '.join(NUMERIC_KINDS)} (e.g. {{loguniform: [1e-4, 1e-2]}}) or a fixed value"
        )
    return raw


def load_sweep(path: Path | str, overrides: Mapping[str, Any] | None = None) -> SweepConfig:
    """Reads and validates a sweep file, applying ``--set`` style overrides first.

    Raises:
        ConfigError: listing every problem in the file; also when the file cannot be read
            or parsed (see :mod:`versatil.sweep.config.sweep_file`).
    """
    path = Path(path)
    source = str(path)
    data = parse_yaml(read_text(path), f"sweep file {source!r}")
    data = apply_overrides(data, overrides or {})
    try:
        check_plain_data(data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    config = validate_sweep(data, source=source)
    check_limits(config, source)
    return config


def validate_sweep(data: Mapping[str, Any], source: str = "sweep") -> SweepConfig:
    """Validates plain data into a SweepConfig, raising one ConfigError for all problems."""
    try:
        return SweepConfig.model_validate(data)
    except pydantic.ValidationError as error:
        lines = describe_validation_error(error, model=SweepConfig)
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None


def check_limits(config: SweepConfig, source: str = "sweep") -> None:
    """Rejects a valid-looking sweep that could not run: too many trials, seeds out of range.

    Raises:
        ConfigError: naming each field, its value and the limit.
    """
    errors = []
    for field, seed in (("search.seed", config.search.seed), ("trainer.seed", config.trainer.seed)):
        if seed is not None and not 0 <= seed <= MAX_SEED:
            errors.append(f"{field}: {seed} is out of range; use 0 to {MAX_SEED}")
    samples = config.search.num_samples
    combos = 1
    for name, axis in config.space.items():
        if name in ENUM_AXES and config.search.algorithm == "grid":
            combos *= len(axis)
        elif _is_grid(axis):
            combos *= len(axis.args)
    if samples > MAX_TRIALS or samples * combos > MAX_TRIALS:
        errors.append(
            f"search.num_samples: {samples} samples of {combos} grid combinations are more "
            f"than {MAX_TRIALS} trials"
        )
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(errors))


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Sets dotted keys (``trainer.max_epochs``) in a copy of ``data``.

    Only the sections on an override's path are copied; ``data`` is left unchanged.

    Raises:
        ConfigError: when a dotted key has an empty part or runs through a value that is
            not a section.
    """
    result = dict(data)
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        if not all(part.strip() for part in (*parents, leaf)):
            raise ConfigError(f"--set {dotted}: empty name in the dotted key")
        node = result
        for depth, part in enumerate(parents):
            child = node.get(part, {})
            if not isinstance(child, Mapping):
                where = ".".join(parents[: depth + 1])
                raise ConfigError(f"--set {dotted}: {where} is not a section; it holds {child!r}")
            node[part] = dict(child)
            node = node[part]
        node[leaf] = value
    return result
