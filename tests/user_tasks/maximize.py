"""A classifier ranked by accuracy (``objective.mode: max``), with nested params.

``optimizer: {lr: ..., betas: [...]}`` is a nested param, as configs often hold them.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.user_tasks.truth import SamplesTruth


def blobs(n, seed):
    generator = torch.Generator().manual_seed(seed)
    label = torch.randint(0, 3, (n,), generator=generator)
    centers = torch.tensor([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    return TensorDataset(centers[label] + torch.randn(n, 2, generator=generator), label)


class BlobClassifier(SamplesTruth, L.LightningModule):
    def __init__(self, width: int = 16, optimizer: dict | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.mlp = nn.Sequential(nn.Linear(2, width), nn.GELU(), nn.Linear(width, 3))

    def true_samples(self, batch):
        return batch[0].size(0)

    def forward(self, x):
        return self.mlp(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x).float(), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x).float()
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_accuracy", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        options = self.hparams.optimizer or {}
        return torch.optim.Adam(
            self.parameters(),
            lr=options.get("lr", 1e-2),
            betas=tuple(options.get("betas", (0.9, 0.999))),
        )


class Blobs(L.LightningDataModule):
    def __init__(self, n_train=320):
        super().__init__()
        self.n_train = n_train

    def setup(self, stage=None):
        self.train, self.val = blobs(self.n_train, 0), blobs(96, 1)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=32, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=96)


def build(params):
    params = dict(params)
    n_train = params.pop("n_train", 320)
    return BlobClassifier(**params), Blobs(n_train)
