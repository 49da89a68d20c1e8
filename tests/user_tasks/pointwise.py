"""A user's regression whose layers are chains of small pointwise ops, in tuple batches.

Each block gates and mixes its features with a dozen elementwise ops on small tensors
(a gated residual with a learned scale and a soft clip), the shape of many hand-written
research layers. Eager PyTorch runs each op as its own kernel; ``torch.compile`` fuses a
block's ops into one, so compile pays off on a CPU: the case where the answer must say
"faster" and when the compile time is won back.
"""

import lightning as L
import pydantic
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Params(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    width: int = pydantic.Field(32, ge=1)
    blocks: int = pydantic.Field(6, ge=1)
    lr: float = pydantic.Field(3e-3, gt=0)
    batch_size: int = pydantic.Field(64, ge=1)
    n_train: int = pydantic.Field(4096, ge=8)
    n_val: int = pydantic.Field(512, ge=8)


class GatedBlock(nn.Module):
    """A residual block of pointwise ops around one small matmul."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.mix = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))
        self.shift = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mix(x)
        gate = torch.sigmoid(h * self.scale + self.shift)
        soft = torch.tanh(h) * gate + (1 - gate) * torch.nn.functional.silu(x)
        clipped = soft / (1 + soft.abs())
        return x + 0.5 * clipped * torch.exp(-0.1 * clipped * clipped)


class PointwiseRegressor(L.LightningModule):
    def __init__(self, width: int = 32, blocks: int = 6, lr: float = 3e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.inp = nn.Linear(8, width)
        self.body = nn.Sequential(*(GatedBlock(width) for _ in range(blocks)))
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.body(self.inp(x)))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self(x).float(), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x).float(), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def _pairs(n: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=generator)
    y = torch.sin(x[:, :4]).sum(1, keepdim=True) + 0.5 * x[:, 4:].prod(1, keepdim=True)
    return TensorDataset(x, y)


class PairsData(L.LightningDataModule):
    def __init__(self, batch_size: int, n_train: int, n_val: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.n_train, self.n_val = n_train, n_val

    def setup(self, stage=None):
        self.train, self.val = _pairs(self.n_train, 0), _pairs(self.n_val, 1)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.batch_size)


def build(params):
    p = Params(**params)
    model = PointwiseRegressor(width=p.width, blocks=p.blocks, lr=p.lr)
    return model, PairsData(p.batch_size, p.n_train, p.n_val)


build.params_model = Params
