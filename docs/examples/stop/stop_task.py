"""The reaching task, whose trial with lr ``stop_lr`` says when it is mid-way, and waits.

At its second epoch's start (its first epoch reported and checkpointed), that trial
writes ``mid-way`` beside this file and waits until ``go`` exists there. The session
(``stop.py``) stops the sweep at that point, by no clock, then lets the trial go on when
the sweep resumes.
"""

import time
from pathlib import Path

from versatil.training.tasks.reaching import (
    BehaviorCloningPolicy,
    ReachingDemonstrations,
    ReachingParams,
)

HERE = Path(__file__).resolve().parent
WAIT_S = 300.0


class StopParams(ReachingParams):
    """The reaching task's parameters, and the lr of the trial that is stopped mid-way."""

    stop_lr: float


class MidWayPolicy(BehaviorCloningPolicy):
    """The reaching policy; with ``waits``, it waits at its second epoch for ``go``."""

    def __init__(self, waits: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.waits = waits

    def on_train_epoch_start(self) -> None:
        if self.waits and self.current_epoch == 1 and not (HERE / "go").exists():
            (HERE / "mid-way").touch()
            deadline = time.monotonic() + WAIT_S
            while not (HERE / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.1)


def build(params):
    """The task: the model and its data, for the sweep's ``task: stop_task:build``."""
    p = StopParams(**params)
    model = MidWayPolicy(
        waits=p.lr == p.stop_lr,
        width=p.width,
        depth=p.depth,
        lr=p.lr,
        eps=p.eps,
        weight_decay=p.weight_decay,
    )
    return model, ReachingDemonstrations(p)


build.params_model = StopParams
