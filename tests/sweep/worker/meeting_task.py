"""A reaching task whose trials meet in their first epoch, "tests.sweep.worker.meeting_task:build".

Every trial, in its first epoch, writes ``in-<pid>-<lr>`` into the directory ``meet`` as the
epoch starts and waits until ``parties`` trials have; as the epoch ends (after versatil's
callbacks sampled and reported it, Lightning calls the module's hook last) it writes
``out-...`` and waits again. So every trial's first epoch, from its first batch to its end,
lies wholly inside every other's fit: each sees the others holding the GPU at its epoch's
end, whatever the clock does. A fit whose markers are all there already (a re-timing from
the checkpoint) does not wait.
"""

import os
import time
from pathlib import Path

from versatil.training.tasks.reaching import (
    BehaviorCloningPolicy,
    ReachingDemonstrations,
    ReachingParams,
)

MEET_TIMEOUT_S = 120


class MeetingParams(ReachingParams):
    meet: str
    parties: int = 2


def _meet(directory: Path, stage: str, name: str, parties: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stage}-{name}").touch()
    deadline = time.monotonic() + MEET_TIMEOUT_S
    while len(list(directory.glob(f"{stage}-*"))) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{stage}: {parties} trials did not meet in {MEET_TIMEOUT_S} s")
        time.sleep(0.05)


class MeetingPolicy(BehaviorCloningPolicy):
    def __init__(self, meet: str, parties: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.meet = Path(meet)
        self.parties = parties
        self.name = f"{os.getpid()}-{kwargs['lr']}"

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 0:
            _meet(self.meet, "in", self.name, self.parties)

    def on_train_epoch_end(self) -> None:
        if self.current_epoch == 0:
            _meet(self.meet, "out", self.name, self.parties)


def build(params):
    p = MeetingParams(**params)
    model = MeetingPolicy(
        meet=p.meet,
        parties=p.parties,
        width=p.width,
        depth=p.depth,
        lr=p.lr,
        eps=p.eps,
        weight_decay=p.weight_decay,
    )
    return model, ReachingDemonstrations(p)


build.params_model = MeetingParams
