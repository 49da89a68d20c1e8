"""A classifier that owns its dataloaders (tuple batches) and returns no datamodule.

Its factory declares no params model: it takes its params as keyword arguments.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.user_tasks.truth import SamplesTruth


class TwoMoons(SamplesTruth, L.LightningModule):
    def __init__(self, width=16, lr=0.05, batch_size=16, n_samples=384):
        super().__init__()
        self.save_hyperparameters()
        self.classifier = nn.Sequential(nn.Linear(2, width), nn.Tanh(), nn.Linear(width, 2))
        generator = torch.Generator().manual_seed(0)
        angle = torch.rand(n_samples, generator=generator) * torch.pi
        label = torch.randint(0, 2, (n_samples,), generator=generator)
        x = torch.stack([angle.cos() + label, angle.sin() * (1 - 2 * label) + 0.5 * label], 1)
        self.data = TensorDataset(x + 0.1 * torch.randn(x.shape, generator=generator), label)

    def true_samples(self, batch):
        return batch[0].shape[0]

    def forward(self, x):
        return self.classifier(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x).float(), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x).float()
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.data, batch_size=64)


def build(params):
    return TwoMoons(**params)
