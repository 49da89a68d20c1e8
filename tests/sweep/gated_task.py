"""The reaching task with a gate, loaded as "tests.sweep.gated_task:build".

The trial whose lr is ``gated_lr`` reports its first ``gated_epoch`` epochs (default 1),
then waits until the file ``gate`` exists (at most five minutes), so a test can interrupt a
sweep at a known point. While it waits, the file ``<gate>.waiting`` exists.
"""

import time
from pathlib import Path

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


class GatedPolicy(BehaviorCloningPolicy):
    def __init__(self, gate: str | None = None, gated_epoch: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = Path(gate) if gate else None
        self.gated_epoch = gated_epoch

    def on_train_epoch_start(self) -> None:
        if self.gate is None or self.current_epoch < self.gated_epoch or self.gate.exists():
            return
        Path(f"{self.gate}.waiting").touch()
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def build(params):
    p = GatedParams(**params)
    model = GatedPolicy(
        gate=p.gate if p.lr == p.gated_lr else None,
        gated_epoch=p.gated_epoch,
        width=p.width,
        depth=p.depth,
        lr=p.lr,
        eps=p.eps,
        weight_decay=p.weight_decay,
    )
    return model, ReachingDemonstrations(p)


build.params_model = GatedParams
