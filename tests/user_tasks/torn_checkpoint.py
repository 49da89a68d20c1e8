"""A classifier whose worker dies once, at the start of its third epoch, leaving its newest
checkpoint torn (``last.ckpt`` cut in half), as a kill during a checkpoint write would.

The tear is real: the file Tune restores the retried trial from is truncated on disk. A
marker file in the trial directory makes it happen on the first attempt only.
"""

from pathlib import Path

from ray import tune

from tests.user_tasks.maximize import BlobClassifier, Blobs


class WorkerLost(RuntimeError):
    """Stands for the worker process dying: Tune retries the trial from its checkpoint."""


class TornCheckpoint(BlobClassifier):
    def __init__(self, storage: str, width: int = 16):
        super().__init__(width=width)
        self.storage = Path(storage)

    def on_train_epoch_start(self):
        super().on_train_epoch_start()
        if self.current_epoch != 2:
            return
        # The trial's directory on the storage path, where Tune keeps its checkpoints.
        (trial_dir,) = self.storage.glob(f"*/{tune.get_context().get_trial_id()}")
        marker = trial_dir / "torn-once"
        if marker.exists():
            return
        marker.touch()
        newest = max(trial_dir.glob("checkpoint_*"), key=lambda d: d.name)
        last = newest / "last.ckpt"
        last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
        raise WorkerLost(f"worker lost after tearing {newest.name}/last.ckpt")


def build(params):
    return TornCheckpoint(**params), Blobs()
