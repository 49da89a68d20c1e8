"""A causal language model on an endless token stream, as language models are trained.

The training data is an ``IterableDataset`` with no length that never ends (a stream of
token windows from a synthetic "grammar": each token is the previous one plus a step
drawn per window, modulo the vocabulary), so an epoch never ends: the fit must be
budgeted in steps (``trainer.max_steps``). Batches are dicts (``input_ids``), as
Hugging Face-style pipelines give them; validation is a fixed set of windows. The stream
is seeded by ``data_seed``, so every fit sees the same data in the same order.

Params: ``vocab``, ``seq_len``, ``d_model``, ``heads``, ``layers``, ``batch_size``,
``lr``, ``n_val``, ``data_seed``.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


def windows(generator: torch.Generator, n: int, vocab: int, length: int) -> torch.Tensor:
    """``n`` token windows of ``length``: a random start and step per window."""
    start = torch.randint(0, vocab, (n, 1), generator=generator)
    step = torch.randint(1, 4, (n, 1), generator=generator)
    return (start + step * torch.arange(length)) % vocab


class TokenStream(IterableDataset):
    """An endless stream of token windows (no ``__len__``), the same for every fit."""

    def __init__(self, vocab: int, length: int, batch_size: int, seed: int) -> None:
        self.vocab, self.length, self.batch_size, self.seed = vocab, length, batch_size, seed

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed)
        while True:
            yield {"input_ids": windows(generator, self.batch_size, self.vocab, self.length)}


class CausalLM(L.LightningModule):
    def __init__(self, vocab=32, seq_len=16, d_model=32, heads=2, layers=1, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(vocab, d_model)
        # A window is seq_len + 1 tokens (inputs and targets): the model takes either.
        self.position = nn.Parameter(torch.zeros(seq_len + 1, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model, heads, 2 * d_model, dropout=0.0, batch_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)
        mask = torch.triu(torch.full((seq_len + 1, seq_len + 1), float("-inf")), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, input_ids):
        length = input_ids.shape[1]
        x = self.embed(input_ids) + self.position[:length]
        mask = self.causal_mask[:length, :length].to(x.dtype)
        return self.head(self.blocks(x, mask=mask, is_causal=True))

    def _loss(self, batch):
        tokens = batch["input_ids"]
        logits = self(tokens[:, :-1]).float()
        return nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log(
            "train_loss", loss, on_step=False, on_epoch=True, batch_size=len(batch["input_ids"])
        )
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch), batch_size=len(batch["input_ids"]))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


class Stream(L.LightningDataModule):
    def __init__(self, vocab=32, seq_len=16, batch_size=16, n_val=64, data_seed=0):
        super().__init__()
        self.vocab, self.length, self.batch_size = vocab, seq_len + 1, batch_size
        self.n_val, self.data_seed = n_val, data_seed

    def train_dataloader(self):
        stream = TokenStream(self.vocab, self.length, self.batch_size, self.data_seed)
        return DataLoader(stream, batch_size=None)

    def val_dataloader(self):
        generator = torch.Generator().manual_seed(self.data_seed + 1)
        tokens = windows(generator, self.n_val, self.vocab, self.length)
        batches = [{"input_ids": t} for t in tokens.split(self.batch_size)]
        return DataLoader(batches, batch_size=None)


def build(params):
    p = {"vocab": 32, "seq_len": 16, "batch_size": 16, "n_val": 64, "data_seed": 0, **params}
    data = Stream(p["vocab"], p["seq_len"], p.pop("batch_size"), p.pop("n_val"), p.pop("data_seed"))
    return CausalLM(**p), data
