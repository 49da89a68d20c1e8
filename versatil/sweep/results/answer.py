"""The answer's types: one setting against the reference, and the verdict over them."""

from __future__ import annotations

import dataclasses
from typing import Any

from versatil.stats import Estimate
from versatil.sweep.results.compile_cost import CompileCost, compile_fields
from versatil.training.metric_names import (
    CEILING_FRACTION,
    FLOPS_PER_SAMPLE,
    JOULES_PER_SAMPLE,
    MFU,
    SAMPLES_PER_SEC,
    TFLOPS,
)

__all__ = ["Setting", "SettingResult", "Verdict"]

SETTING_HARDWARE = (FLOPS_PER_SAMPLE, TFLOPS, CEILING_FRACTION, MFU, JOULES_PER_SAMPLE)
"""The hardware values a setting reports, in the tables' order."""

Setting = tuple[str, str, str]
"""A precision, compile mode and matmul precision."""


@dataclasses.dataclass(frozen=True)
class SettingResult:
    """One setting's finished trials, against the reference.

    Attributes:
        label: The setting in words (``bf16-mixed + default``).
        setting: Its precision, compile mode and matmul precision.
        speed: Its samples/s with an interval (its trials' median, their intervals' hull);
            ``None`` when no trial was timed long enough, alone on its GPU.
        speedup: Its speed over the reference's, with an interval; ``None`` if unmeasured.
        speed_call: ``faster``, ``slower``, ``tie``, ``reference``, ``unmeasured`` (timed
            too short) or ``shared`` (timed while trials shared a GPU).
        objective: Its best configuration's objective: the mean over seeds, with an interval.
        change: The objective's difference from the reference's, relative to it, with an
            interval over seeds (``None`` when the reference's objective is 0): over the
            per-seed differences where the seeds line up (``paired``), else Welch's.
        no_worse: Whether the objective passes the non-inferiority rule
            (``objective_call`` is ``no worse``).
        trials: How many of its trials finished.
        seeds: How many seeds its best configuration trained with.
        best_trial: The best trial of its best configuration.
        params: Its best configuration's params that vary in the sweep (``lr=0.01``).
        rounds: The paired rounds its speedup was re-timed in; 0 when it comes from the
            sweep's own trials.
        time_to_target: The median ``time_to_target_s`` of its best configuration's trials
            that reached the target, when at least half of them did (``seeds`` of them);
            ``None`` (never) otherwise, or when no target was set.
        reached_target: How many of those trials reached it, of ``seeds``.
        objective_call: ``no worse`` (the change's worse end within the tolerance, or with
            one seed its point estimate), ``undecided`` (the interval straddles the
            tolerance) or ``worse``; empty when not judged, then read from ``no_worse``.
        paired: Whether ``change`` is a paired interval over per-seed differences.
        seeds_to_decide: For an ``undecided`` objective, how many seeds would decide it
            with 80% power (from the per-seed spread); ``None`` otherwise or when none
            would.
        hardware: The median over its trials of ``flops_per_sample``, ``tflops``,
            ``ceiling_fraction``, ``mfu`` and ``joules_per_sample``, where reported.
        compile: A compiled setting's compile time, graphs, graph breaks, recompiles and
            break-even (:mod:`~versatil.sweep.results.compile_cost`); ``None`` when eager.
    """

    label: str
    setting: Setting
    speed: Estimate | None
    speedup: Estimate | None
    speed_call: str
    objective: Estimate
    change: Estimate | None
    no_worse: bool
    trials: int
    seeds: int
    best_trial: str
    params: str = ""
    rounds: int = 0
    time_to_target: float | None = None
    reached_target: int = 0
    objective_call: str = ""
    paired: bool = False
    seeds_to_decide: int | None = None
    hardware: dict[str, float] = dataclasses.field(default_factory=dict)
    compile: CompileCost | None = None

    @property
    def samples_per_sec(self) -> float | None:
        """The setting's median samples/s, or ``None``."""
        return None if self.speed is None else self.speed.value

    @property
    def call(self) -> str:
        """The objective's call: ``no worse``, ``undecided`` or ``worse``."""
        return self.objective_call or ("no worse" if self.no_worse else "worse")

    def as_dict(self) -> dict[str, Any]:
        """The setting as plain values (``report --format json``)."""
        out: dict[str, Any] = {
            "label": self.label,
            "precision": self.setting[0],
            "compile_mode": self.setting[1],
            "matmul_precision": self.setting[2],
            "trials": self.trials,
            "seeds": self.seeds,
            "best_trial": self.best_trial,
            "params": self.params,
            "rounds": self.rounds,
            "time_to_target_s": self.time_to_target,
            "reached_target": self.reached_target,
            "speed": self.speed_call,
            "no_worse": self.no_worse,
            "objective_call": self.call,
            "objective_change_paired": self.paired,
            "seeds_to_decide": self.seeds_to_decide,
        }
        out.update(_bounds(SAMPLES_PER_SEC, self.speed))
        out.update(_bounds("speedup", self.speedup))
        out.update(_bounds("objective", self.objective))
        out.update(_bounds("objective_change", self.change))
        out.update({name: self.hardware.get(name) for name in SETTING_HARDWARE})
        out.update(compile_fields(self.compile))
        return out


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a sweep says: settings against a reference, and the recommendation.

    Attributes:
        metric: The primary objective.
        mode: Its mode.
        tolerance: How much worse than the reference still counts as no worse (relative).
        reference: The setting the others are compared with (``None``: nothing finished).
        is_baseline: Whether the reference is eager fp32 (else the sweep's own reference,
            or the slowest setting).
        settings: Every setting, the reference first, then the fastest first.
        recommended: The recommended setting's best trial id.
        recommended_setting: The recommended setting's label.
        tied: The settings tied with the recommended one on speed (labels), itself first.
        text: The verdict in words.
        target: The objective each trial's time to target is measured to; ``None`` when
            none was set.
        listed_reference: Whether the reference is the sweep's own, each settings axis at
            its first listed value (a space without eager fp32); else, when not the
            baseline, it is the slowest finished setting.
    """

    metric: str
    mode: str
    tolerance: float
    reference: SettingResult | None
    is_baseline: bool
    settings: list[SettingResult]
    recommended: str | None
    recommended_setting: str | None
    tied: list[str]
    text: str
    target: float | None = None
    listed_reference: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The verdict as plain values: the recommendation, the ties and the sentence."""
        return {
            "metric": self.metric,
            "mode": self.mode,
            "tolerance": self.tolerance,
            "reference": None if self.reference is None else self.reference.label,
            "reference_is_baseline": self.is_baseline,
            "recommended": self.recommended_setting,
            "recommended_trial": self.recommended,
            "tied": list(self.tied),
            "text": self.text,
            "target": self.target,
        }


def _bounds(name: str, estimate: Estimate | None) -> dict[str, float | None]:
    if estimate is None:
        return {name: None, f"{name}_ci_low": None, f"{name}_ci_high": None}
    finite = estimate.bounded
    return {
        name: estimate.value,
        f"{name}_ci_low": estimate.low if finite else None,
        f"{name}_ci_high": estimate.high if finite else None,
    }
