"""A residual conv net with BatchNorm on synthetic images, sized by its params.

Which quadrant of a noisy 3-channel image holds a bright patch (4 classes). Every size is
a param, so the same task is a CPU smoke test and a GPU benchmark
(``benchmarks/gpu_matrix.py``). Params: ``n_train``, ``n_val``, ``image_size``,
``channels``, ``blocks``, ``batch_size``, ``lr``, ``eps`` (AdamW's; ``16-true`` needs
~1e-4), ``data_seed``, and ``fp64_pause_s``: a pause in each fp64 training step, so that a
test's "fp64 is slower" holds by construction however loaded the machine is (the
re-timing's verdict is what such a test checks, not this CPU's fp64 speed).

Like the reaching task, batches are sliced out of the image tensors whole (a
``BatchSampler`` as the sampler): collating thousands of images one by one would measure
the data loader rather than the precision.
"""

import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)

CLASSES = 4


def images(n, size, seed):
    generator = torch.Generator().manual_seed(seed)
    label = torch.randint(0, CLASSES, (n,), generator=generator)
    x = torch.randn(n, 3, size, size, generator=generator) * 0.5
    half = size // 2
    for quadrant in range(CLASSES):
        rows = slice(0, half) if quadrant < 2 else slice(half, size)
        cols = slice(0, half) if quadrant % 2 == 0 else slice(half, size)
        x[label == quadrant, :, rows, cols] += 1.0
    return TensorDataset(x, label)


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x):
        return torch.relu(x + self.body(x))


class ConvClassifier(L.LightningModule):
    def __init__(self, channels=16, blocks=2, lr=3e-3, eps=1e-8, fp64_pause_s=0.0):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            *[Block(channels) for _ in range(blocks)],
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(channels, CLASSES),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.hparams.fp64_pause_s and self.net[0].weight.dtype == torch.float64:
            time.sleep(self.hparams.fp64_pause_s)
        loss = nn.functional.cross_entropy(self(x).float(), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x).float()
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, eps=self.hparams.eps)


class Images(L.LightningDataModule):
    def __init__(self, n_train, n_val, image_size, batch_size, data_seed):
        super().__init__()
        self.sizes = (n_train, n_val, image_size)
        self.batch_size, self.data_seed = batch_size, data_seed

    def setup(self, stage=None):
        n_train, n_val, size = self.sizes
        self.train = images(n_train, size, self.data_seed)
        self.val = images(n_val, size, self.data_seed + 1)

    def _loader(self, dataset, shuffle):
        sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
        batches = BatchSampler(sampler, batch_size=self.batch_size, drop_last=False)
        return DataLoader(dataset, sampler=batches, batch_size=None)

    def train_dataloader(self):
        return self._loader(self.train, shuffle=True)

    def val_dataloader(self):
        return self._loader(self.val, shuffle=False)


def build(params):
    p = {
        "n_train": 512,
        "n_val": 128,
        "image_size": 16,
        "batch_size": 64,
        "data_seed": 0,
        **params,
    }
    data = Images(
        p.pop("n_train"),
        p.pop("n_val"),
        p.pop("image_size"),
        p.pop("batch_size"),
        p.pop("data_seed"),
    )
    return ConvClassifier(**p), data
