"""A classifier whose second epoch asks for more memory than any machine has (``hog``).

The allocation is real: the CPU allocator refuses it, as it would a batch too large.
"""

import torch

from tests.user_tasks.maximize import BlobClassifier, Blobs

TEN_TERABYTES = 10**13


class MemoryHog(BlobClassifier):
    def __init__(self, hog: bool = False, width: int = 16):
        super().__init__(width=width)
        self.hog = hog

    def training_step(self, batch, batch_idx):
        if self.hog and self.current_epoch == 1:
            torch.empty(TEN_TERABYTES, dtype=torch.uint8)
        return super().training_step(batch, batch_idx)


def build(params):
    return MemoryHog(**params), Blobs()
