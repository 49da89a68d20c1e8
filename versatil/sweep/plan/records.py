"""The parts of a sweep's plan: typed, immutable records of what prepare chose.

Each record holds plain values (numbers, strings, tuples), so a plan pickles to the
workers, writes as JSON (``plan.json``) and compares with another plan field by field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "GPU_ACCELERATORS",
    "Budget",
    "Objectives",
    "Race",
    "Reference",
    "Resources",
    "Retiming",
    "Sampled",
    "Scheduler",
    "Search",
    "Where",
]

GPU_ACCELERATORS = ("gpu", "cuda")
"""The ``trainer.accelerator`` values that train on a GPU, so a trial must hold one."""


@dataclasses.dataclass(frozen=True)
class Sampled:
    """A task-param axis Tune samples or crosses: ``kind`` and its values or bounds.

    Attributes:
        kind: ``choice``, ``grid``, ``uniform``, ``loguniform`` or ``randint``.
        args: The values (``choice``, ``grid``) or ``(low, high)``, ``randint``'s inclusive.
    """

    kind: str
    args: tuple[Any, ...]

    def describe(self) -> str:
        """A short text for the axis, as ``--dry-run`` shows it: ``loguniform(0.001, 0.1)``."""
        return f"{self.kind}({', '.join(map(str, self.args))})"


@dataclasses.dataclass(frozen=True)
class Objectives:
    """What the trials are judged on.

    Attributes:
        objectives: ``(metric, mode)`` pairs, the primary first.
        tolerance: How much worse than the reference still counts as no worse (relative).
        target: A fixed objective value for the time to target, else ``None`` (the
            reference's own final objective is the target).
        field: The sweep file's field that names them (``objective.metric`` or
            ``objective.metrics``), for the messages that point at it.
    """

    objectives: tuple[tuple[str, str], ...]
    tolerance: float
    target: float | None = None
    field: str = "objective.metric"

    @property
    def metric(self) -> str:
        """The primary objective's metric."""
        return self.objectives[0][0]

    @property
    def mode(self) -> str:
        """The primary objective's mode, ``min`` or ``max``."""
        return self.objectives[0][1]

    @property
    def is_multi(self) -> bool:
        """Whether the trials are ranked as a Pareto set of several objectives."""
        return len(self.objectives) > 1


@dataclasses.dataclass(frozen=True)
class Budget:
    """How long each trial trains, and what the budget is counted in.

    Attributes:
        amount: The budget, counted in ``unit``: 60 (steps), 3 (epochs), or Lightning's
            ``max_time`` as given (``"00:01:00:00"``).
        unit: What the budget counts: ``steps`` (``trainer.max_steps``), ``time``
            (``trainer.max_time``) or ``epochs``.
        max_epochs: The epochs of a trial; ``None`` when a step or time budget alone
            bounds it.
        options: The Lightning Trainer options every trial passes (the budget's among
            them), as the sweep file gives them.
    """

    amount: int | str
    unit: str = "epochs"
    max_epochs: int | None = 3
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def counted(self) -> str:
        """The budget as a reader says it: ``60 steps``, ``1 epoch``, ``00:01:00:00``."""
        if self.unit == "time":
            return f"{self.amount} of training"
        unit = self.unit.removesuffix("s") if self.amount == 1 else self.unit
        return f"{self.amount} {unit}"


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one trial holds, and what the re-timing (and a race's screen) holds.

    Attributes:
        accelerator: The trials' ``trainer.accelerator``.
        cpu: CPUs per trial (per worker).
        gpus: GPUs per trial (per worker), resolved for the accelerator.
        workers_per_trial: Data-parallel workers per trial.
        max_concurrent_trials: Trials at once, ``None``: as many as the resources allow.
        max_failures: Retries of a trial that crashes.
    """

    accelerator: str
    cpu: float
    gpus: float
    workers_per_trial: int = 1
    max_concurrent_trials: int | None = None
    max_failures: int = 1

    @property
    def shares_gpu(self) -> bool:
        """Whether a trial holds a fraction of a GPU, so that trials share one."""
        return 0 < self.gpus < 1

    @property
    def distributed(self) -> bool:
        """Whether a trial runs data-parallel across several workers."""
        return self.workers_per_trial > 1

    @property
    def devices_per_trial(self) -> float:
        """The devices one trial holds: its GPUs (all its workers'), or one CPU device."""
        gpus = self.gpus * self.workers_per_trial
        return gpus if gpus > 0 else 1.0

    @property
    def retime(self) -> dict[str, float]:
        """The re-timing task's Ray resources: a trial's CPUs, its GPUs rounded up to whole.

        Trials with a fraction of a GPU timed each other on it; the re-timing holds whole
        GPUs, so no trial's task shares them while it times.
        """
        return {"num_cpus": self.cpu, "num_gpus": math.ceil(self.gpus) if self.gpus > 0 else 0}


@dataclasses.dataclass(frozen=True)
class Race:
    """A race's screen (``search.algorithm: race``).

    Attributes:
        alpha: The family-wise error of eliminating a setting that is not slower.
        rounds: The most rounds the screen runs.
        round_s: Seconds of training per setting and round.
    """

    alpha: float
    rounds: int
    round_s: float


@dataclasses.dataclass(frozen=True)
class Search:
    """How the space is searched.

    Attributes:
        algorithm: ``grid``, ``random``, ``optuna`` or ``race``.
        num_samples: Samples of the space (each grid point's, for a grid).
        seed: The searcher's seed.
        seeds: The seeds each configuration trains with (one per replicate).
        race: The race's screen, for ``race``; else ``None``.
    """

    algorithm: str
    num_samples: int
    seed: int | None
    seeds: tuple[int, ...]
    race: Race | None = None

    @property
    def crosses_settings(self) -> bool:
        """Whether the settings axes are crossed as a grid (grid search and the race)."""
        return self.algorithm in ("grid", "race")

    @property
    def replicates(self) -> int:
        """Seeds per configuration."""
        return len(self.seeds)


@dataclasses.dataclass(frozen=True)
class Scheduler:
    """The trial scheduler: FIFO, ASHA or PBT, and the objective it compares.

    Attributes:
        type: ``fifo``, ``asha`` or ``pbt``.
        metric: The metric ASHA or PBT compares.
        mode: Its mode.
        time_attr: What ASHA and PBT count (Tune's ``training_iteration``: reports).
        max_t: ASHA's most reports of a trial (the budget).
        grace_period: ASHA: reports before a trial may stop.
        reduction_factor: ASHA's halving rate.
        perturbation_interval: PBT: reports between perturbations.
        hyperparam_mutations: PBT: what it mutates, each a :class:`Sampled` or a list.
        synch: PBT: synchronous perturbation.
        quantile_fraction: PBT: the share of trials exploited and exploiting.
    """

    type: str
    metric: str
    mode: str
    time_attr: str = "training_iteration"
    max_t: int = 1
    grace_period: int = 1
    reduction_factor: float = 2.0
    perturbation_interval: int = 1
    hyperparam_mutations: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    synch: bool = False
    quantile_fraction: float = 0.25


@dataclasses.dataclass(frozen=True)
class Reference:
    """The setting every other is compared with, and how it was chosen.

    Attributes:
        settings: The reference's value on each settings axis of the space.
        compares: Whether the space holds more than one setting (else every trial is
            the reference, and nothing is compared).
        chosen: How it was chosen: ``eager fp32``, or a sentence naming each axis that
            leaves eager fp32 out and the value taken instead.
    """

    settings: Mapping[str, str]
    compares: bool
    chosen: str = "eager fp32"


@dataclasses.dataclass(frozen=True)
class Retiming:
    """The end's re-timing of the settings in contention (``confirm``).

    Attributes:
        enabled: ``auto``, ``on`` or ``off``.
        rounds: Paired, interleaved rounds.
        round_s: Seconds of training per setting and round.
        max_candidates: Settings per group, the reference's included.
        seed: The seed the candidates train with.
    """

    enabled: str
    rounds: int
    round_s: float
    max_candidates: int
    seed: int


@dataclasses.dataclass(frozen=True)
class Where:
    """Where the sweep's results and runs go.

    Attributes:
        storage_path: The storage path: an absolute directory, or an object-storage URI.
        remote: Whether the storage path is on object storage.
        experiment: The MLflow experiment.
        tracking_uri: The MLflow store, once prepare chose it; ``None`` before.
        log_checkpoints: Which trials' checkpoints MLflow keeps: ``best``, ``all``, ``none``.
        register: The registered model the answer's checkpoint becomes a version of.
    """

    storage_path: str
    remote: bool
    experiment: str
    tracking_uri: str | None = None
    log_checkpoints: str = "best"
    register: str | None = None
