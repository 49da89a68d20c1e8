"""A small GAN, written the way Lightning's own GAN example is: manual optimization.

``automatic_optimization = False``, two optimizers (generator and discriminator) taken
from ``self.optimizers()`` and toggled in turn, ``self.manual_backward``, schedulers stepped
by the module at each epoch's end, and a streamed ``IterableDataset`` with no ``__len__``
(each pass draws new samples), so neither the Trainer nor the sampler knows the epoch's
length in advance.

Params (all optional): ``latent``, ``hidden``, ``dim`` (the data's dimension),
``batch_size``, ``n_samples`` (per epoch), ``lr``.

For tests, the module also keeps, per training batch, its samples and its own times
(:attr:`GAN.batch_times`), besides the per-epoch truth of :class:`SamplesTruth`.
"""

import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

from tests.user_tasks.truth import SamplesTruth


class Stream(IterableDataset):
    """Samples of a fixed Gaussian (a random linear map of white noise), drawn as read."""

    def __init__(self, dim: int, n_samples: int, seed: int) -> None:
        super().__init__()
        self.dim, self.n_samples, self.seed = dim, n_samples, seed
        generator = torch.Generator().manual_seed(1234)
        self.mix = torch.randn(dim, dim, generator=generator) / dim**0.5
        self.shift = torch.randn(dim, generator=generator)
        self._passes = 0

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self._passes)
        self._passes += 1
        for start in range(0, self.n_samples, 256):  # drawn 256 at a time, read one by one
            rows = min(256, self.n_samples - start)
            yield from torch.randn(rows, self.dim, generator=generator) @ self.mix + self.shift


def mlp(n_in: int, hidden: int, n_out: int, activation: nn.Module) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), activation, nn.Linear(hidden, n_out))


class GAN(SamplesTruth, L.LightningModule):
    def __init__(
        self,
        latent: int = 16,
        hidden: int = 64,
        dim: int = 8,
        batch_size: int = 128,
        n_samples: int = 4096,
        lr: float = 2e-3,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = mlp(latent, hidden, dim, nn.ReLU())
        self.discriminator = mlp(dim, hidden, 1, nn.LeakyReLU(0.2))
        self.batch_times: list[tuple[int, int, float, float]] = []  # epoch, samples, start, end

    def true_samples(self, batch):
        return batch.shape[0]

    def forward(self, z):
        return self.generator(z)

    def forward_inputs(self, batch):
        """The forward's inputs for a batch (versatil's input example): noise, not data."""
        return torch.randn(batch.shape[0], self.hparams.latent)

    def adversarial_loss(self, logits, real: bool):
        target = torch.full_like(logits, 1.0 if real else 0.0)
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), target.float())

    def training_step(self, batch, batch_idx):
        optimizer_g, optimizer_d = self.optimizers()
        z = torch.randn(batch.shape[0], self.hparams.latent, device=self.device)

        self.toggle_optimizer(optimizer_g)
        g_loss = self.adversarial_loss(self.discriminator(self(z)), real=True)
        self.manual_backward(g_loss)
        optimizer_g.step()
        optimizer_g.zero_grad()
        self.untoggle_optimizer(optimizer_g)

        self.toggle_optimizer(optimizer_d)
        real_loss = self.adversarial_loss(self.discriminator(batch), real=True)
        fake_loss = self.adversarial_loss(self.discriminator(self(z).detach()), real=False)
        d_loss = (real_loss + fake_loss) / 2
        self.manual_backward(d_loss)
        optimizer_d.step()
        optimizer_d.zero_grad()
        self.untoggle_optimizer(optimizer_d)

        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, on_step=False, on_epoch=True)
        self.log("train_loss", d_loss + g_loss, on_step=False, on_epoch=True)

    def validation_step(self, batch, batch_idx):
        generator = torch.Generator().manual_seed(batch_idx)
        z = torch.randn(batch.shape[0], self.hparams.latent, generator=generator)
        fake = self(z.to(self.device)).float()
        real = batch.float()
        moments = (fake.mean(0) - real.mean(0)).square().sum()
        moments = moments + (fake.std(0) - real.std(0)).square().sum()
        self.log("val_loss", moments)

    def on_train_epoch_end(self):
        for scheduler in self.lr_schedulers():
            scheduler.step()

    def on_train_batch_start(self, batch, batch_idx):
        super().on_train_batch_start(batch, batch_idx)
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx):
        end = time.perf_counter()
        self.batch_times.append((self.current_epoch, batch.shape[0], self._batch_start, end))
        super().on_train_batch_end(outputs, batch, batch_idx)

    def configure_optimizers(self):
        lr = self.hparams.lr
        optimizer_g = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))
        optimizer_d = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        schedulers = [
            torch.optim.lr_scheduler.ExponentialLR(o, 0.9) for o in (optimizer_g, optimizer_d)
        ]
        return [optimizer_g, optimizer_d], schedulers

    def train_dataloader(self):
        stream = Stream(self.hparams.dim, self.hparams.n_samples, seed=0)
        return DataLoader(stream, batch_size=self.hparams.batch_size)

    def val_dataloader(self):
        stream = Stream(self.hparams.dim, 1024, seed=10_000)
        return DataLoader(stream, batch_size=512)


def build(params):
    return GAN(**params)


def flops_per_sample(latent: int = 16, hidden: int = 64, dim: int = 8, **_) -> int:
    """The FLOPs ``FlopCounterMode`` counts for one sample of one training step, by hand.

    A Linear of ``n_in`` inputs and ``n_out`` outputs costs ``2*n_in*n_out`` per sample
    forward, as much again for its weight gradient and for its input gradient, each only
    when needed: a toggled-off network's weights need no gradient, and neither do the
    noise ``z``, the real batch, nor the detached fakes.
    """
    g1, g2 = 2 * latent * hidden, 2 * hidden * dim  # generator: forward of each Linear
    d1, d2 = 2 * dim * hidden, 2 * hidden * 1  # discriminator
    # Generator step: G and D forward; backward through D (input gradients only, its
    # weights are toggled off), then G2's weight and input gradients, G1's weight gradient.
    generator_step = (g1 + g2 + d1 + d2) + (d2 + d1) + (2 * g2 + g1)
    # Discriminator step: D on the real batch, G again (no gradient), D on the fakes;
    # backward of both D passes: D2's weight and input gradients, D1's weight gradient.
    discriminator_step = (d1 + d2) + (g1 + g2) + (d1 + d2) + 2 * (2 * d2 + d1)
    return generator_step + discriminator_step
