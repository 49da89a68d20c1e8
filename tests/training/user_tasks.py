"""A user's task as versatil meets it, loaded as "tests.training.user_tasks:build".

Batches are dicts, the optimizer is built in ``configure_optimizers`` from the module's own
hparams (two param groups, the head's lr scaled), and nothing in it knows about versatil.
Params (all optional): ``n`` samples, ``batch_size``, ``lr``, ``momentum``,
``weight_decay``, ``head_lr_factor``, ``scheduler`` (halve the lr every epoch),
``ballast_mb`` (a temporary allocation in every training step), ``crash_epoch`` (raise at
the start of that epoch unless the fit was resumed from a checkpoint), ``tokens`` (count
tokens per batch with ``count_samples``).
"""

import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

FEATURES = 4
TOKENS = 6


def tokens_of(index: int) -> int:
    """Sample ``index`` holds this many real tokens (the rest of its row is padding)."""
    return 1 + index % TOKENS


class DictDataset(Dataset):
    """Samples as dicts: ``features``, ``target`` and a token ``mask``."""

    def __init__(self, n: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.features = torch.randn(n, FEATURES, generator=generator)
        self.target = self.features.sum(1, keepdim=True)

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        mask = torch.arange(TOKENS) < tokens_of(index)
        return {"features": self.features[index], "target": self.target[index], "mask": mask}


class UserData(L.LightningDataModule):
    def __init__(self, n: int = 40, batch_size: int = 8) -> None:
        super().__init__()
        self.n = n
        self.batch_size = batch_size

    def setup(self, stage=None):
        self.data = DictDataset(self.n)

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.data, batch_size=self.batch_size)


class UserModel(L.LightningModule):
    def __init__(
        self,
        lr: float = 0.05,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        head_lr_factor: float = 1.0,
        scheduler: bool = False,
        ballast_mb: int = 0,
        crash_epoch: int = -1,
        val_pause_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 8), torch.nn.Tanh())
        self.head = torch.nn.Linear(8, 1)

    def forward(self, features):
        return self.head(self.body(features))

    def on_train_epoch_start(self):
        if self.current_epoch == self.hparams.crash_epoch and self.trainer.ckpt_path is None:
            raise RuntimeError(f"crashed at the start of epoch {self.current_epoch}")

    def training_step(self, batch, batch_idx):
        if self.hparams.ballast_mb:
            # Resident while the step runs (ones() writes every page), freed when it ends.
            ballast = torch.ones(self.hparams.ballast_mb * 2**20 // 4)
            assert float(ballast[-1]) == 1.0
            del ballast
        loss = torch.nn.functional.mse_loss(self(batch["features"]), batch["target"])
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        time.sleep(self.hparams.val_pause_s)  # a slow validation, where a test needs one
        loss = torch.nn.functional.mse_loss(self(batch["features"]), batch["target"])
        self.log("val_loss", loss)

    def configure_optimizers(self):
        hp = self.hparams
        optimizer = torch.optim.SGD(
            [
                {"params": self.body.parameters()},
                {"params": self.head.parameters(), "lr": hp.lr * hp.head_lr_factor},
            ],
            lr=hp.lr,
            momentum=hp.momentum,
            weight_decay=hp.weight_decay,
        )
        if not hp.scheduler:
            return optimizer
        halving = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.5**epoch)
        return {"optimizer": optimizer, "lr_scheduler": halving}


class TokenModel(UserModel):
    """A language-model-like task: its throughput is tokens, not sequences."""

    def count_samples(self, batch) -> int:
        return int(batch["mask"].sum())


def build(params):
    params = dict(params)
    data = UserData(n=params.pop("n", 40), batch_size=params.pop("batch_size", 8))
    model_class = TokenModel if params.pop("tokens", False) else UserModel
    return model_class(**params), data
