"""A regression whose batches are dicts, as Hugging Face-style pipelines produce them.

Its params are declared with a pydantic model, so a sweep checks them before Ray starts.
"""

import lightning as L
import pydantic
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tests.user_tasks.truth import SamplesTruth


class Params(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    hidden: int = pydantic.Field(32, ge=1)
    lr: float = pydantic.Field(1e-2, gt=0)
    batch_size: int = pydantic.Field(32, ge=1)
    n_samples: int = pydantic.Field(512, ge=8)


class PairsDataset(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.features = torch.randn(n, 8, generator=generator)
        self.target = self.features[:, :4].sum(1, keepdim=True) - self.features[:, 4:].prod(1, True)

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"features": self.features[index], "target": self.target[index]}


class DictRegressor(SamplesTruth, L.LightningModule):
    def __init__(self, hidden: int = 32, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def true_samples(self, batch):
        return len(batch["target"])

    def forward(self, features):
        return self.net(features)

    def training_step(self, batch, batch_idx):
        loss = nn.functional.mse_loss(self(batch["features"]).float(), batch["target"])
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        prediction = self(batch["features"]).float()
        self.log("val_loss", nn.functional.mse_loss(prediction, batch["target"]))
        self.log("val_mae", (prediction - batch["target"]).abs().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class PairsData(L.LightningDataModule):
    def __init__(self, batch_size: int, n_samples: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.n_samples = n_samples

    def setup(self, stage=None):
        self.train = PairsDataset(self.n_samples, seed=0)
        self.val = PairsDataset(self.n_samples // 4, seed=1)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.batch_size)


def build(params):
    p = Params(**params)
    return DictRegressor(hidden=p.hidden, lr=p.lr), PairsData(p.batch_size, p.n_samples)


build.params_model = Params
