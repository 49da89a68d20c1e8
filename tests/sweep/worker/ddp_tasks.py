"""Tasks that fail data-parallel trials the ways single-worker ones fail, on chosen ranks.

- ``odd_width``: an odd ``width`` is bad params, raising ConfigError as the task is built
  (on every rank), as a params check in a user's factory would.
- ``rank_hog``: the second epoch's first step asks for more memory than any machine has,
  on every rank (``hog_rank: -1``) or on one. The allocation is real: the CPU allocator
  refuses it. The other ranks then wait for it in the gradients' all-reduce.
- ``torn_on_rank_zero``: rank 0 tears the trial's newest checkpoint (``last.ckpt`` cut in
  half) at the start of the third epoch, once, and fails the attempt, as a worker killed
  during a checkpoint write would leave it.
"""

import time
from pathlib import Path

import torch

from tests.user_tasks.maximize import BlobClassifier, Blobs
from versatil.errors import ConfigError
from versatil.sweep.worker.restore import readable

TEN_TERABYTES = 10**13
EVERY_RANK = -1


def odd_width(params):
    width = params.get("width", 16)
    if width % 2:
        raise ConfigError(f"task.params.width: {width} is odd; the classifier takes even widths")
    return BlobClassifier(**params), Blobs()


class RankHog(BlobClassifier):
    def __init__(self, hog_rank: int, width: int = 16):
        super().__init__(width=width)
        self.hog_rank = hog_rank

    def training_step(self, batch, batch_idx):
        if self.current_epoch == 1 and self.hog_rank in (EVERY_RANK, self.global_rank):
            torch.empty(TEN_TERABYTES, dtype=torch.uint8)
        return super().training_step(batch, batch_idx)


def rank_hog(params):
    return RankHog(**params), Blobs()


class WorkerLost(RuntimeError):
    """Stands for the worker process dying: Tune retries the trial from its checkpoint."""


def wait_until(condition, what, timeout=300.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.2)


class TornOnRankZero(BlobClassifier):
    def __init__(self, storage: str, width: int = 16):
        super().__init__(width=width)
        self.storage = Path(storage)

    def on_train_epoch_start(self):
        super().on_train_epoch_start()
        if self.current_epoch != 2 or not self.trainer.is_global_zero:
            return

        def trial_dir():
            # The sweep's one trial, in Tune's experiment directory (not Ray Train's).
            found = [
                path.parent
                for path in self.storage.glob("*/*/checkpoint_000000")
                if path.parents[1].name != "distributed"
            ]
            return found[0] if found else None

        # Rank 0 reports without waiting for the trial's coordinator to hand the checkpoint
        # to Tune: wait until Tune has the whole of epoch 1's.
        wait_until(trial_dir, "the trial's first checkpoint in Tune")
        marker = trial_dir() / "torn-once"
        if marker.exists():
            return
        last = trial_dir() / "checkpoint_000001" / "last.ckpt"
        wait_until(lambda: readable(last) is None, f"a readable {last}")
        # The checkpoint is persisted before the driver records its result: a failure
        # raised before that could lose epoch 1's result. Wait for the driver's record.
        results = trial_dir() / "result.json"
        wait_until(
            lambda: results.exists() and results.read_text().count("\n") >= 2,
            "epoch 1's result recorded by the driver",
        )
        marker.touch()
        last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
        raise WorkerLost(f"worker lost after tearing {last.parent.name}/last.ckpt")


def torn_on_rank_zero(params):
    return TornOnRankZero(**params), Blobs()
