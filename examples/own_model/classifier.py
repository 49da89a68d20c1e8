"""A small classifier written as a plain LightningModule, and the factory a sweep file names.

Nothing here imports versatil. The sweep file's ``task.name``,
``examples.own_model.classifier:build``, points at :func:`build`.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    """Random points in 16 dimensions, each labelled by one fixed random network (4 classes).

    Samples are dicts, as Hugging Face-style datasets give them.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.x = torch.randn(n, 16, generator=torch.Generator().manual_seed(seed))
        teacher = torch.Generator().manual_seed(1234)  # one labelling for every split
        hidden = torch.tanh(self.x @ torch.randn(16, 32, generator=teacher))
        self.y = (hidden @ torch.randn(32, 4, generator=teacher)).argmax(1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "y": self.y[index]}


class Accuracy:
    """The share of correct predictions over every batch since the last reset."""

    def __init__(self) -> None:
        self.correct = self.total = 0

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        """Counts one batch's correct predictions."""
        self.correct += int((logits.argmax(1) == target).sum())
        self.total += len(target)

    def compute(self) -> float:
        """The accuracy so far; then starts counting again."""
        accuracy = self.correct / max(self.total, 1)
        self.correct = self.total = 0
        return accuracy


class Classifier(L.LightningModule):
    """An MLP over the 16 features, trained with cross-entropy; logs ``val_acc``."""

    def __init__(self, hidden: int = 64, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(16, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 4),
        )
        self.val_accuracy = Accuracy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The class logits of a batch of points."""
        return self.net(x)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """Cross-entropy on one batch; logs ``train_loss`` once per epoch."""
        loss = nn.functional.cross_entropy(self(batch["x"]).float(), batch["y"])
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        """Logs ``val_loss`` and counts correct predictions."""
        logits = self(batch["x"]).float()
        self.log("val_loss", nn.functional.cross_entropy(logits, batch["y"]))
        self.val_accuracy.update(logits, batch["y"])

    def on_validation_epoch_end(self) -> None:
        """Logs ``val_acc``: the accuracy over the whole validation set."""
        self.log("val_acc", self.val_accuracy.compute())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """Adam at the learning rate the sweep gives."""
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class PointsData(L.LightningDataModule):
    """Training and validation points in batches that divide both splits evenly."""

    def __init__(self, batch_size: int = 512, n_train: int = 32768) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.n_train = n_train

    def setup(self, stage: str | None = None) -> None:
        """Makes both splits: the same ones in every process."""
        self.train, self.val = Points(self.n_train, seed=0), Points(self.n_train // 4, seed=1)

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches."""
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches, in order."""
        return DataLoader(self.val, batch_size=self.batch_size)


def build(params: dict) -> tuple[Classifier, PointsData]:
    """The task factory: the sweep's task params in, ``(module, datamodule)`` out.

    Args:
        params: ``task.params`` of the sweep file and the trial's value of each swept
            param (``lr``); the settings (precision, compile mode) are not among them.
    """
    params = dict(params)
    data = PointsData(params.pop("batch_size", 512), params.pop("n_train", 32768))
    return Classifier(**params), data
