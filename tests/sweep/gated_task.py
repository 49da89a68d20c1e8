"""The reaching task with a gate, loaded as "tests.sweep.gated_task:build".

The trial whose lr is ``gated_lr`` reports its first ``gated_epoch`` epochs (default 1),
then waits until the file ``gate`` exists (at most five minutes), so a test can interrupt a
sweep at a known point. While it waits, the file ``<gate>.waiting`` exists.

A second gate (``second_gate``, for the trial whose lr is ``second_lr``) holds another
trial the same way, so a test can let one trial go on while the other still waits.

With ``gated_at: checkpoint_write`` it waits instead in the middle of saving epoch
``gated_epoch``'s checkpoint: its temporary directory is made and the checkpoint is being
pickled (Lightning pickles it in memory, then writes the file).
"""

import collections
import time
from pathlib import Path
from typing import Literal

from versatil.training.tasks.reaching import (
    BehaviorCloningPolicy,
    ReachingDemonstrations,
    ReachingParams,
)

GATE_TIMEOUT_S = 300


class GatedParams(ReachingParams):
    gate: str
    gated_lr: float
    gated_epoch: int = 1
    gated_at: Literal["epoch_start", "checkpoint_write"] = "epoch_start"
    second_gate: str = ""
    second_lr: float | None = None


def _wait(gate: Path) -> None:
    Path(f"{gate}.waiting").touch()
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


class _WaitWhenPickled:
    """Waits at the gate while the checkpoint is pickled; saved as an empty OrderedDict."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def __reduce__(self):
        _wait(self.gate)
        return (collections.OrderedDict, ())


class GatedPolicy(BehaviorCloningPolicy):
    def __init__(
        self, gate: str | None = None, gated_epoch: int = 1, gated_at: str = "", **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.gate = Path(gate) if gate else None
        self.gated_epoch = gated_epoch
        self.gated_at = gated_at

    def _gated(self, where: str) -> bool:
        return (
            self.gate is not None
            and self.gated_at == where
            and self.current_epoch >= self.gated_epoch
            and not self.gate.exists()
        )

    def on_train_epoch_start(self) -> None:
        if self._gated("epoch_start"):
            _wait(self.gate)

    def on_save_checkpoint(self, checkpoint) -> None:
        if self._gated("checkpoint_write") and self.current_epoch == self.gated_epoch:
            checkpoint["gate"] = _WaitWhenPickled(self.gate)


def build(params):
    p = GatedParams(**params)
    gate = p.gate if p.lr == p.gated_lr else p.second_gate if p.lr == p.second_lr else None
    model = GatedPolicy(
        gate=gate,
        gated_epoch=p.gated_epoch,
        gated_at=p.gated_at,
        width=p.width,
        depth=p.depth,
        lr=p.lr,
        eps=p.eps,
        weight_decay=p.weight_decay,
    )
    return model, ReachingDemonstrations(p)


build.params_model = GatedParams
