"""User-style tasks whose FLOPs are known analytically, and one whose FLOPs cannot be counted.

Loaded as ``tests.training.hardware_tasks:build_mlp`` (a dict-batch MLP),
``...:build_conv`` (a conv net on tuple batches), ``...:build_locked`` (an MLP holding a
lock: it cannot be deep-copied, as modules holding file handles or clients cannot) and
``...:build_elementwise`` (a model with no matrix product: nothing to count).
"""

import threading

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

MLP_LAYERS = ((8, 32), (32, 16), (16, 4))
CONV = {"channels": 3, "width": 8, "image": 16, "classes": 10}


def mlp_flops_per_sample() -> int:
    """Forward 2*in*out per Linear; backward the weight gradient of every Linear and the
    input gradient of every Linear but the first (its input needs no gradient)."""
    forward = sum(2 * i * o for i, o in MLP_LAYERS)
    return 2 * forward + sum(2 * i * o for i, o in MLP_LAYERS[1:])


def conv_flops_per_sample() -> int:
    """Per sample: each conv's 2*out_channels*H*W*in_channels*k*k, the head's 2*in*out."""
    c, w, s, k = CONV["channels"], CONV["width"], CONV["image"], CONV["classes"]
    conv1 = 2 * w * s * s * c * 9
    conv2 = 2 * w * (s // 2) ** 2 * w * 9  # after a 2x2 max-pool
    head = 2 * w * (s // 2) ** 2 * k
    forward = conv1 + conv2 + head
    return 2 * forward + conv2 + head


class Pairs(Dataset):
    def __init__(self, n: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, MLP_LAYERS[0][0], generator=generator)
        self.y = self.x[:, :4].sin()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"features": self.x[i], "target": self.y[i]}


class DictMLP(L.LightningModule):
    def __init__(self, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        layers = []
        for i, (n_in, n_out) in enumerate(MLP_LAYERS):
            layers += [nn.Linear(n_in, n_out)] + ([nn.ReLU()] if i < len(MLP_LAYERS) - 1 else [])
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        loss = nn.functional.mse_loss(self(batch["features"]).float(), batch["target"])
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        self.log(
            "val_loss", nn.functional.mse_loss(self(batch["features"]).float(), batch["target"])
        )

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class LockedMLP(DictMLP):
    """Holds a lock, as modules holding a client or a file do: it cannot be deep-copied."""

    def __init__(self, lr: float = 0.01) -> None:
        super().__init__(lr)
        self.lock = threading.Lock()


class Elementwise(DictMLP):
    """Weights each feature and sums: no matrix product, no convolution."""

    def __init__(self, lr: float = 0.01) -> None:
        super().__init__(lr)
        self.net = None
        self.scale = nn.Parameter(torch.ones(MLP_LAYERS[0][0]))

    def forward(self, x):
        return (x * self.scale)[:, : MLP_LAYERS[-1][1]]


class SmallConv(L.LightningModule):
    def __init__(self, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        c, w, k = CONV["channels"], CONV["width"], CONV["classes"]
        self.features = nn.Sequential(
            nn.Conv2d(c, w, 3, padding=1, bias=False),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, w, 3, padding=1, bias=False),
            nn.ReLU(),
        )
        self.head = nn.Linear(w * (CONV["image"] // 2) ** 2, k)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x).float(), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x).float(), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Data(L.LightningDataModule):
    def __init__(self, train, val, batch_size: int) -> None:
        super().__init__()
        self.train, self.val, self.batch_size = train, val, batch_size

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.batch_size)


def _mlp_data(params):
    n = int(params.get("n_samples", 512))
    return Data(Pairs(n), Pairs(n // 4), int(params.get("batch_size", 64)))


def build_mlp(params):
    return DictMLP(), _mlp_data(params)


def build_locked(params):
    return LockedMLP(), _mlp_data(params)


def build_elementwise(params):
    return Elementwise(), _mlp_data(params)


def build_conv(params):
    generator = torch.Generator().manual_seed(0)
    n, c, s = int(params.get("n_samples", 256)), CONV["channels"], CONV["image"]
    images = torch.randn(n, c, s, s, generator=generator)
    labels = torch.randint(0, CONV["classes"], (n,), generator=generator)
    data = TensorDataset(images, labels)
    return SmallConv(), Data(data, data, int(params.get("batch_size", 32)))
