"""Paired, interleaved re-timing of trained settings, the way benchmarking tools compare programs.

Each contender is a trial's checkpoint directory. All are built once in this process (the
settings applied, the weights loaded, compiled where the settings say), then trained in
rounds: in every round each contender trains the same number of steps on the same batches
(the data order is seeded by the round), one after the other on this one device, in a
random order drawn anew each round from the seed (:func:`round_order`, recorded), so that
neither a drift of the machine's speed nor a carry-over from one contender to the next
favours any of them: a fixed alternation (A B C, then C B A) runs the reference twice
back to back at every other boundary. A round's throughput is its steady-state samples
per second: the batches after a few warm-up steps, CUDA synchronised after each. Round 0
warms up (compiles, calibrates the steps) and is not counted.

Two contenders' speed ratio is then measured once per round, each round's shared noise
cancelled; :func:`versatil.stats.ratio_ci` turns the rounds into a median with its interval.

:func:`screen` runs the same rounds from initial weights instead of checkpoints: every
contender built from its task with the same seed, so all start from the same weights. It
asks after each round which contenders are out (they train no more rounds) and whether to
stop: the race's screen.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from typing_extensions import override

from versatil.training.apply import apply_settings, reset_process_state
from versatil.training.checkpoint import read_checkpoint
from versatil.training.constants import CheckpointKey, Float32MatmulPrecision
from versatil.training.fit import build_trainer
from versatil.training.metrics import count_samples
from versatil.training.spec import DeviceInfo
from versatil.training.tasks import build_task
from versatil.training.trainer_options import step_options

__all__ = ["AfterRound", "Retimed", "retime", "round_order", "screen"]

AfterRound = Callable[[Mapping[str, Sequence[float]]], tuple[Collection[str], bool]]
"""Called after each counted round with every contender's rates so far: the contenders
out now (they train no more rounds), and whether to stop."""

_QUIET = (
    r".*does not have many workers.*",
    r".*isinstance\(treespec, LeafSpec\).*",
    r".*smaller than the logging interval.*",
    r".*max_epochs.*",
)


@dataclasses.dataclass(frozen=True)
class Retimed:
    """What the rounds measured.

    Attributes:
        labels: The contenders, in the order given.
        samples_per_sec: Per contender, its throughput in each counted round.
        orders: The order the contenders trained in, per counted round.
        steps: Steps timed per contender per round (after ``warmup_steps``).
        warmup_steps: Steps each fit trained before the timing started.
        device: The device they trained on.
        torch_threads: The threads torch computed with.
        warmup_s: Per contender, the warm-up round's seconds (compiling included), timed
            apart from the counted rounds.
        dropped: The contenders taken out after a round, with the rounds they ran.
        wall_s: The whole re-timing's seconds, building and warm-up included.
    """

    labels: list[str]
    samples_per_sec: dict[str, list[float]]
    orders: list[list[str]]
    steps: int
    warmup_steps: int
    device: str
    torch_threads: int
    warmup_s: dict[str, float] = dataclasses.field(default_factory=dict)
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Plain values (the ``confirm.json`` artifact)."""
        return dataclasses.asdict(self)


class _RoundTimer(L.Callback):
    """Times the batches after the first ``warmup`` of a fit: samples and seconds."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.batches = 0
        self.samples = 0
        self.start: float | None = None
        self.end: float | None = None

    @override
    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, i: int
    ) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        now = time.perf_counter()
        self.batches += 1
        if self.batches == self.warmup:
            self.start = now
        elif self.batches > self.warmup:
            self.samples += count_samples(pl_module, batch)
            self.end = now

    @property
    def seconds(self) -> float:
        """The timed batches' wall time."""
        return 0.0 if self.start is None or self.end is None else self.end - self.start


@dataclasses.dataclass
class _Contender:
    label: str
    config: Any
    model: L.LightningModule
    datamodule: L.LightningDataModule


def _build(label: str, directory: Path) -> _Contender:
    config, checkpoint = read_checkpoint(directory)
    built: dict[str, Any] = {}

    def build_model() -> L.LightningModule:
        model, built["datamodule"] = build_task(config.task, config.params)
        model.load_state_dict(checkpoint[CheckpointKey.STATE_DICT])
        return model

    model = apply_settings(config.settings, build_model)
    return _Contender(label, config, model, built["datamodule"])


def _build_initial(label: str, config: Any) -> _Contender:
    """A contender from its task's initial weights: the same seed, the same weights."""
    L.seed_everything(config.seed, workers=True, verbose=False)
    built: dict[str, Any] = {}

    def build_model() -> L.LightningModule:
        model, built["datamodule"] = build_task(config.task, config.params)
        return model

    model = apply_settings(config.settings, build_model)
    return _Contender(label, config, model, built["datamodule"])


def _fit(contender: _Contender, steps: int, warmup: int, round_seed: int) -> _RoundTimer:
    """Trains ``warmup + steps`` steps of one contender; returns their timing."""
    settings = contender.config.settings
    matmul = settings.matmul_precision or Float32MatmulPrecision.HIGHEST
    torch.set_float32_matmul_precision(matmul.value)  # process-wide: set for every fit
    torch.manual_seed(round_seed)  # the same batches, in the same order, for every contender
    timer = _RoundTimer(warmup)
    # The user's Trainer options that shape a step (accumulation, clipping) apply; the
    # budget, the validation cadence and the user's callbacks are the round's own.
    config = contender.config.model_copy(update={"trainer": step_options(contender.config.trainer)})
    trainer = build_trainer(
        config,
        [timer],
        max_epochs=-1,
        max_steps=warmup + steps,
        limit_val_batches=0,
    )
    with warnings.catch_warnings():
        for pattern in _QUIET:
            warnings.filterwarnings("ignore", message=pattern)
        trainer.fit(contender.model, datamodule=contender.datamodule)
    return timer


def retime(
    contenders: Sequence[tuple[str, str | Path]],
    *,
    rounds: int = 10,
    round_s: float = 0.5,
    warmup_steps: int = 2,
    max_steps: int = 5000,
    seed: int = 0,
) -> Retimed:
    """Re-times trained contenders in paired, interleaved rounds on this process's device.

    Args:
        contenders: ``(label, checkpoint directory)`` of each, the reference first.
        rounds: Rounds counted (after the warm-up round).
        round_s: The least training time each contender's timed steps should take; the
            steps are calibrated in the warm-up round from the slowest contender.
        warmup_steps: Steps of each fit before its timing starts.
        max_steps: At most this many timed steps per contender per round.
        seed: Seeds the process before the contenders are built.
    """
    if len(contenders) < 2:
        raise ValueError("retime needs at least two contenders")
    start = time.perf_counter()
    reset_process_state(seed)  # once: resetting dynamo later would drop the compiled code
    built = [_build(label, Path(directory)) for label, directory in contenders]
    return _rounds(built, rounds, round_s, warmup_steps, max_steps, seed, None, start)


def screen(
    contenders: Sequence[tuple[str, Any]],
    *,
    rounds: int = 12,
    round_s: float = 0.5,
    warmup_steps: int = 2,
    max_steps: int = 5000,
    seed: int = 0,
    after_round: AfterRound | None = None,
) -> Retimed:
    """Times contenders from their initial weights in paired, interleaved rounds.

    Each contender is built from its task with its config's seed (the same for all, so
    the same initial weights), its settings applied; then the rounds run as in
    :func:`retime`, and after each one ``after_round`` says which contenders are out and
    whether to stop.

    Args:
        contenders: ``(label, TrainConfig)`` of each, the reference first.
        rounds: At most this many counted rounds.
        round_s: As :func:`retime`'s.
        warmup_steps: As :func:`retime`'s.
        max_steps: As :func:`retime`'s.
        seed: Seeds the process before the contenders are built.
        after_round: Takes every contender's rates so far; gives the contenders out now
            and whether to stop. ``None``: every round runs, nobody is out.
    """
    if len(contenders) < 2:
        raise ValueError("screen needs at least two contenders")
    start = time.perf_counter()
    reset_process_state(seed)
    built = [_build_initial(label, config) for label, config in contenders]
    return _rounds(built, rounds, round_s, warmup_steps, max_steps, seed, after_round, start)


def round_order(contenders: Sequence[Any], seed: int, index: int) -> list[Any]:
    """The order the contenders train in at counted round ``index``: a random permutation.

    Drawn from ``seed`` and ``index`` alone, so a run with the same seed trains in the same
    orders, and each round's is independent of the others'.
    """
    order = list(contenders)
    random.Random(f"versatil.round_order:{seed}:{index}").shuffle(order)
    return order


def _rounds(
    built: list[_Contender],
    rounds: int,
    round_s: float,
    warmup_steps: int,
    max_steps: int,
    seed: int,
    after_round: AfterRound | None,
    start: float,
) -> Retimed:
    """The warm-up round, then up to ``rounds`` counted ones; see :func:`retime`."""
    # Warm-up round: compiles, fills caches, and calibrates the number of steps.
    probe = 3
    slowest = 0.0
    warmup_s = {}
    for contender in built:
        began = time.perf_counter()
        timer = _fit(contender, probe, warmup_steps, seed)
        warmup_s[contender.label] = time.perf_counter() - began
        slowest = max(slowest, timer.seconds / probe)
    steps = max_steps if slowest == 0 else min(max_steps, max(3, math.ceil(round_s / slowest)))
    samples: dict[str, list[float]] = {c.label: [] for c in built}
    orders, dropped = [], {}
    racing = list(built)
    for index in range(rounds):
        order = round_order(racing, seed, index)
        orders.append([c.label for c in order])
        for contender in order:
            timer = _fit(contender, steps, warmup_steps, seed + 1 + index)
            rate = timer.samples / timer.seconds if timer.seconds > 0 else math.nan
            samples[contender.label].append(rate)
        if after_round is None:
            continue
        out, stop = after_round(samples)
        for label in out:
            dropped.setdefault(label, index + 1)
        racing = [c for c in racing if c.label not in dropped]
        if stop or len(racing) < 2:
            break
    device = DeviceInfo.detect(built[0].config.accelerator)
    return Retimed(
        labels=[c.label for c in built],
        samples_per_sec=samples,
        orders=orders,
        steps=steps,
        warmup_steps=warmup_steps,
        device=device.name,
        torch_threads=torch.get_num_threads(),
        warmup_s=warmup_s,
        dropped=dropped,
        wall_s=time.perf_counter() - start,
    )
