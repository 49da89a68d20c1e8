"""A classifier that fills the disk under ``ballast`` after its first epoch (``fill``).

Its first epoch is reported and checkpointed; then the module's own epoch-end hook (it
runs after the trainer's callbacks) writes a ballast file there until the disk has no
space left, so the second epoch's checkpoint meets a full disk, as a run that fills a
real disk meets it, whatever the checkpoints' sizes.
"""

import errno
from pathlib import Path

from tests.user_tasks.maximize import BlobClassifier, Blobs

BALLAST = "ballast.bin"


def fill(directory: Path) -> None:
    """Writes ``directory/ballast.bin`` until the disk it is on has no space left."""
    with (directory / BALLAST).open("ab", buffering=0) as out:
        for size in (2**20, 2**12, 1):  # the last bytes too, whatever the block size
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise


class DiskFiller(BlobClassifier):
    def __init__(self, ballast: str = "", fill: bool = False, width: int = 16):
        super().__init__(width=width)
        self.ballast, self.fill = ballast, fill

    def on_train_epoch_end(self):
        if self.fill and self.current_epoch == 0:
            fill(Path(self.ballast))


def build(params):
    return DiskFiller(**params), Blobs()
