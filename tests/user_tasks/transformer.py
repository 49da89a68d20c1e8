"""Lightning's demo Transformer on a synthetic copy task; throughput counted in tokens.

It logs several metrics (loss, perplexity, token accuracy) and tells versatil how much
work a batch is with ``count_samples`` (tokens, as language-model throughput is quoted).
"""

import math

import lightning as L
import torch
from lightning.pytorch.demos import Transformer
from torch.utils.data import DataLoader, TensorDataset

from tests.user_tasks.truth import SamplesTruth

VOCAB = 16


def sequences(n, length, seed):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, VOCAB, (n, length), generator=generator)
    return TensorDataset(tokens, tokens.flip(1))


class TinyTransformer(SamplesTruth, L.LightningModule):
    def __init__(self, ninp: int = 16, nhid: int = 32, lr: float = 1e-2, seq_len: int = 12):
        super().__init__()
        self.save_hyperparameters()
        self.model = Transformer(vocab_size=VOCAB, ninp=ninp, nhead=2, nhid=nhid, nlayers=1)

    def count_samples(self, batch):
        return batch[0].numel()

    true_samples = count_samples

    def forward(self, inputs, target):
        return self.model(inputs, target)

    def _step(self, batch):
        inputs, target = batch
        log_probs = self(inputs, target).float()
        loss = torch.nn.functional.nll_loss(log_probs, target.view(-1))
        accuracy = (log_probs.argmax(-1) == target.view(-1)).float().mean()
        return loss, accuracy

    def training_step(self, batch, batch_idx):
        loss, _ = self._step(batch)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, accuracy = self._step(batch)
        self.log_dict(
            {"val_loss": loss, "val_ppl": math.exp(min(loss.item(), 20)), "val_token_acc": accuracy}
        )

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class Copying(L.LightningDataModule):
    def __init__(self, seq_len: int, batch_size: int = 16):
        super().__init__()
        self.seq_len, self.batch_size = seq_len, batch_size

    def setup(self, stage=None):
        self.train = sequences(192, self.seq_len, 0)
        self.val = sequences(48, self.seq_len, 1)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=48)


def build(params):
    params = dict(params)
    batch_size = params.pop("batch_size", 16)
    module = TinyTransformer(**params)
    return module, Copying(module.hparams.seq_len, batch_size)
