"""A small conv net with BatchNorm on synthetic 1x16x16 images: bright-left vs bright-right."""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.user_tasks.truth import SamplesTruth


def images(n, seed):
    generator = torch.Generator().manual_seed(seed)
    label = torch.randint(0, 2, (n,), generator=generator)
    x = torch.randn(n, 1, 16, 16, generator=generator) * 0.5
    x[label == 1, :, :, :8] += 1.0
    x[label == 0, :, :, 8:] += 1.0
    return TensorDataset(x, label)


class ConvNet(SamplesTruth, L.LightningModule):
    def __init__(self, channels: int = 8, lr: float = 3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(channels, 2)

    def true_samples(self, batch):
        return len(batch[1])

    def forward(self, x):
        return self.head(self.features(x).flatten(1))

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
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


class Images(L.LightningDataModule):
    def __init__(self, batch_size: int = 32, n_train: int = 256):
        super().__init__()
        self.batch_size = batch_size
        self.n_train = n_train

    def setup(self, stage=None):
        self.train, self.val = images(self.n_train, 0), images(64, 1)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=64)


def build(params):
    params = dict(params)
    data = {key: params.pop(key) for key in ("batch_size", "n_train") if key in params}
    return ConvNet(**params), Images(**data)
