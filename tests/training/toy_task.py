"""A user task for the tests, loaded as "tests.training.toy_task:build"; it has a tokenizer."""

import json
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class CharTokenizer:
    """A tiny tokenizer with a save_pretrained(), like Hugging Face's."""

    def __init__(self, vocabulary: str = "abc") -> None:
        self.vocabulary = vocabulary

    def save_pretrained(self, directory: Path) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / "vocab.json").write_text(json.dumps(list(self.vocabulary)))


class ToyRegressor(L.LightningModule):
    def __init__(self, hidden: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(3, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )
        self.tokenizer = CharTokenizer()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x).float(), y.float())
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x).float(), y.float()))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class ToyData(L.LightningDataModule):
    def setup(self, stage=None):
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 3, generator=generator)
        self.data = TensorDataset(x, x.sum(1, keepdim=True))

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=16)

    def val_dataloader(self):
        return DataLoader(self.data, batch_size=16)


def build(params):
    return ToyRegressor(**params), ToyData()
