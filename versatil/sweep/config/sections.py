"""The sweep file's sections besides its axes: task, objective, search, scheduler, ..."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import pydantic

from versatil.sweep.config.axes import NumericAxis
from versatil.sweep.config.limits import check_name
from versatil.sweep.plan.records import GPU_ACCELERATORS
from versatil.training.spec import (
    parse_accelerator,
)
from versatil.training.tasks.cli_config import CONFIG_PARAM
from versatil.training.tasks.cli_config import TASK as CLI_TASK
from versatil.training.trainer_options import check_trainer_options

__all__ = [
    "GPU_ACCELERATORS",
    "ConfirmSection",
    "MlflowSection",
    "ObjectiveSection",
    "RaceSection",
    "ResourcesSection",
    "SchedulerSection",
    "SearchSection",
    "TaskSection",
    "TrainerSection",
]


class ConfirmSection(pydantic.BaseModel):
    """The end of a sweep: its candidates re-timed in paired, interleaved rounds."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: Literal["auto", "on", "off"] = pydantic.Field(
        "auto",
        description="auto: when a setting besides the reference is in contention; on: also "
        "when none is (the Pareto set's settings, those measured slower included); off: never.",
    )
    rounds: int = pydantic.Field(
        10,
        ge=2,
        le=100,
        description="Rounds counted per candidate; with 9 or more, one outlying round does not "
        "decide a call (the median's 95% interval leaves out the extreme round on each side).",
    )
    round_s: float = pydantic.Field(
        0.5, gt=0, le=60, description="Least seconds of timed training per candidate per round."
    )
    max_candidates: int = pydantic.Field(
        6,
        ge=2,
        le=20,
        description="At most this many settings re-timed together, the reference included; "
        "more in contention are re-timed in further groups of this size, each with the "
        "reference.",
    )

    @pydantic.field_validator("enabled", mode="before")
    @classmethod
    def _booleans(cls, value: Any) -> Any:
        # YAML reads on/off as booleans.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


DEFAULT_TASK = "reaching"


class TaskSection(pydantic.BaseModel):
    """Which task the trials train, and its fixed params."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(
        DEFAULT_TASK, description="Built-in task or 'package.module:factory'."
    )
    params: dict[str, Any] = pydantic.Field(default_factory=dict, description="Fixed task params.")
    config: str | None = pydantic.Field(
        None,
        description="A LightningCLI config file (seed_everything, model and data by "
        "class_path/init_args, trainer), read by LightningCLI itself, instead of name; space "
        "axes name its keys (model.lr, data.batch_size); its trainer options join the "
        "trainer section's. A relative path is from the directory the sweep starts in.",
    )
    config_text: str | None = pydantic.Field(
        None,
        description="The config file's text, read when the sweep loads and kept with it, so "
        "that a resume or a sync elsewhere needs no file; not written by hand.",
    )

    @pydantic.model_validator(mode="after")
    def _name_or_config(self) -> TaskSection:
        named = "name" in self.model_fields_set and self.name != DEFAULT_TASK
        if self.config is not None and named:
            raise ValueError(
                f"task: give name ({self.name!r}) or config ({self.config!r}), not both: a "
                "LightningCLI config names its model and data itself"
            )
        return self

    @property
    def spec(self) -> str:
        """The task each trial builds: ``name``, or the LightningCLI config's builder."""
        return CLI_TASK if self.config is not None else self.name

    @property
    def fixed_params(self) -> dict[str, Any]:
        """The params every trial's task gets: ``params``, and a config's text."""
        if self.config is None:
            return dict(self.params)
        return {CONFIG_PARAM: self.config_text, **self.params}


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
        0.01,
        ge=0,
        description="Verdict: how much worse than eager fp32's objective (relative) counts "
        "as no worse.",
    )
    target: float | None = pydantic.Field(
        None,
        description="Time to target: the primary objective a trial must reach (within the "
        "tolerance); default: eager fp32's final objective.",
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


class RaceSection(pydantic.BaseModel):
    """``search.algorithm: race``: the screen's rounds and its elimination rule."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    alpha: float = pydantic.Field(
        0.05,
        gt=0,
        lt=1,
        description="Family-wise error of the screen: the chance of eliminating any setting "
        "that is not slower than the reference.",
    )
    rounds: int = pydantic.Field(
        12, ge=2, le=200, description="At most this many screen rounds counted per setting."
    )
    round_s: float = pydantic.Field(
        0.5, gt=0, le=60, description="Least seconds of timed training per setting per round."
    )


class SearchSection(pydantic.BaseModel):
    """How trials are drawn from the space."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    algorithm: Literal["grid", "random", "optuna", "race"] = pydantic.Field(
        "grid",
        description="grid: the full cross product; random; optuna: TPE; race: the grid's "
        "settings screened for speed from initial weights, then trained fastest first until "
        "one is faster and no worse.",
    )
    num_samples: int = pydantic.Field(
        1, ge=1, description="Trials to sample (random, optuna), or repeats of the grid."
    )
    seed: int | None = pydantic.Field(0, description="Seed of the search algorithm.")
    race: RaceSection = pydantic.Field(
        default_factory=RaceSection, description="race: the screen (see RaceSection)."
    )

    @property
    def crosses_settings(self) -> bool:
        """Whether every combination of the settings axes is a trial (grid, race)."""
        return self.algorithm in ("grid", "race")


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
    """What one trial gets.

    ``gpu`` left out depends on ``trainer.accelerator``: one GPU per trial (per worker)
    for ``gpu`` or ``cuda``, none otherwise. Loading a sweep resolves it
    (:meth:`resolved`); whatever reads it goes through :meth:`gpus_for`.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cpu: float = pydantic.Field(1, gt=0, description="CPUs per trial (per worker).")
    gpu: float | None = pydantic.Field(
        None,
        ge=0,
        description="GPUs per trial (per worker); fractions share a GPU; default: 1 with "
        "trainer.accelerator gpu or cuda, else 0.",
    )
    workers_per_trial: int = pydantic.Field(
        1, ge=1, description="Data-parallel Lightning workers per trial (Ray Train, DDP)."
    )

    def gpus_for(self, accelerator: str) -> float:
        """GPUs per trial (per worker): ``gpu`` as given, else 1 for a GPU accelerator, else 0.

        Args:
            accelerator: The sweep's ``trainer.accelerator``.
        """
        if self.gpu is not None:
            return float(self.gpu)
        return 1.0 if accelerator in GPU_ACCELERATORS else 0.0

    def shares_gpu(self, accelerator: str) -> bool:
        """Whether a trial holds a fraction of a GPU, so that trials share one (0 < gpu < 1)."""
        return 0 < self.gpus_for(accelerator) < 1

    def accelerator_errors(self, accelerator: str) -> list[str]:
        """What is wrong with these resources for ``accelerator``: a GPU accelerator with no GPU.

        Args:
            accelerator: The sweep's ``trainer.accelerator``.
        """
        if accelerator not in GPU_ACCELERATORS or self.gpu != 0:
            return []
        return [
            f"resources.gpu: 0 gives each trial no GPU, but trainer.accelerator is "
            f"{accelerator!r}; give a GPU share above 0 (1, or a fraction such as 0.5 that "
            "trials share), leave resources.gpu out for 1, or set trainer.accelerator to cpu"
        ]

    def resolved(self, accelerator: str) -> ResourcesSection:
        """These resources with ``gpu`` set: :meth:`gpus_for` ``accelerator``."""
        return self.model_copy(update={"gpu": self.gpus_for(accelerator)})


DEFAULT_EPOCHS = 3
"""A trial's epochs when the trainer section bounds it by nothing else."""


class TrainerSection(pydantic.BaseModel):
    """Lightning Trainer options shared by every trial.

    Besides its own fields, the section takes the arguments of
    ``lightning.pytorch.Trainer`` as a user's Trainer takes them: a budget in steps or time
    (``max_steps``, ``max_time``), ``limit_train_batches``, ``val_check_interval``,
    ``check_val_every_n_epoch``, ``accumulate_grad_batches``, ``gradient_clip_val``, ...
    and ``callbacks`` as ``class_path``/``init_args``. They are checked against Lightning
    at load (:mod:`versatil.training.trainer_options`); those versatil sets itself
    (``precision``, ``devices``, ``strategy``, ``logger``, ...) are refused with where they
    belong.
    """

    model_config = pydantic.ConfigDict(extra="allow", frozen=True)

    max_epochs: int | None = pydantic.Field(
        None,
        ge=1,
        description="Epochs per trial; default 3, or unbounded when max_steps or max_time "
        "budgets the trial.",
    )
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

    @pydantic.model_validator(mode="after")
    def _check_options(self) -> TrainerSection:
        check_trainer_options(self.options, fields=list(type(self).model_fields))
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The Lightning Trainer arguments given besides the section's own fields."""
        return dict(self.model_extra or {})

    @property
    def budget(self) -> tuple[int | str, str]:
        """The trial's budget and its unit: ``(60, "steps")``, ``(3, "epochs")``, ....

        Steps come first, then time, when several bound a trial.
        """
        steps, time = self.options.get("max_steps", -1), self.options.get("max_time")
        if steps not in (-1, None):
            return steps, "steps"
        if time is not None:
            return str(time), "time"
        return self.max_epochs or DEFAULT_EPOCHS, "epochs"

    @property
    def epochs(self) -> int | None:
        """The epochs of a trial: ``max_epochs``; else 3, or ``None`` under a step budget.

        Under a step or time budget alone Lightning bounds the fit by that budget.
        """
        if self.max_epochs is not None:
            return self.max_epochs
        return DEFAULT_EPOCHS if self.budget[1] == "epochs" else None


# ``register`` is also a method of pydantic's metaclass (ABCMeta's): the field's value is
# what an instance holds, which is all the sweep reads; pydantic's warning says only that.
warnings.filterwarnings(
    "ignore", message='Field name "register" in "MlflowSection" shadows', category=UserWarning
)


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
        "best",
        description="Which trials' checkpoints are logged as artifacts (best: the "
        "recommended trial's; with several objectives, the best trial on the Pareto set); a "
        "completed trial's also as an MLflow logged model that mlflow.pyfunc.load_model loads.",
    )
    register: str | None = pydantic.Field(
        None,
        description="Register the recommended setting's logged model in the Model Registry "
        "as NAME, its version aliased 'recommended'.",
    )
    register_best: str | None = pydantic.Field(
        None, description="Deprecated: the former name of register, which it sets."
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _register_best_is_register(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("register_best"), str):
            return data  # absent, or the field's own validation names the bad value
        warnings.warn(
            "mlflow.register_best is deprecated: write mlflow.register (it registers the "
            "recommended setting's logged model, aliased 'recommended')",
            FutureWarning,
            stacklevel=2,
        )
        if data.get("register") is None:
            return {**data, "register": data["register_best"]}
        return data

    @pydantic.field_validator("experiment", mode="after")
    @classmethod
    def _check_experiment(cls, experiment: str | None) -> str | None:
        return None if experiment is None else check_name("experiment", experiment)
