"""User tasks that undo or defeat a setting, loaded as "tests.training.in_effect_tasks:NAME".

- ``graph_break``: its MLP's forward branches on a tensor's value (``.item()``), a graph
  break under ``torch.compile``.
- ``never_compiled``: its MLP's forward is ``torch._dynamo.disable``-d, so a compiled trial
  compiles nothing and runs eagerly.
- ``own_matmul_precision``: it sets the float32 matmul precision itself in ``setup``,
  overriding the trial's.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BranchingMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 1)

    def forward(self, x):
        y = self.layer(x)
        if y.sum().item() > 0:  # data-dependent Python branch: dynamo breaks the graph here
            y = y * 1.0
        return y


class DisabledMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 1)

    @torch._dynamo.disable
    def forward(self, x):
        return self.layer(x)


class Regressor(L.LightningModule):
    def __init__(self, net: nn.Module, matmul_precision: str | None = None) -> None:
        super().__init__()
        self.net = net
        self.matmul_precision = matmul_precision

    def setup(self, stage):
        if self.matmul_precision is not None:
            torch.set_float32_matmul_precision(self.matmul_precision)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self(x).float(), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x).float(), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Data(L.LightningDataModule):
    def setup(self, stage=None):
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 3, generator=generator)
        self.data = TensorDataset(x, x.sum(1, keepdim=True))

    def train_dataloader(self):
        # One batch size throughout: no recompile for a short last batch.
        return DataLoader(self.data, batch_size=16)

    def val_dataloader(self):
        return DataLoader(self.data, batch_size=16)


def graph_break(params):
    return Regressor(BranchingMLP()), Data()


def never_compiled(params):
    return Regressor(DisabledMLP()), Data()


def own_matmul_precision(params):
    return Regressor(nn.Linear(3, 1), matmul_precision="medium"), Data()
