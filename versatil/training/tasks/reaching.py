"""Point-mass reaching by behaviour cloning: the built-in task.

An expert PD controller with bounded force drives a 2-D point mass from a random start
to a random goal. Its demonstrations (observation -> action) train an MLP policy by
behaviour cloning. Everything is generated from a seed, so runs are reproducible and
need no download. The defaults train 3 epochs in a few seconds on one CPU core; raise
``n_episodes``, ``width``, ``depth`` and ``batch_size`` to load a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)
from typing_extensions import override

from versatil.training.constants import CheckpointKey
from versatil.training.tasks.reaching_params import ReachingParams

OBS_DIM = 6  # position (2), velocity (2), goal (2)
ACT_DIM = 2  # force


def expert_action(obs: torch.Tensor) -> torch.Tensor:
    """The expert: a PD controller towards the goal, saturated at unit force."""
    position, velocity, goal = obs[..., 0:2], obs[..., 2:4], obs[..., 4:6]
    return torch.tanh(4.0 * (goal - position) - 2.0 * velocity)


def generate_demonstrations(
    n_episodes: int, horizon: int, action_noise: float, seed: int, dt: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rolls the expert out; returns observations ``(n, h, 6)`` and actions ``(n, h, 2)``.

    Noise is added to the executed action (not the label), so the demonstrations cover
    states slightly off the expert's path, as DART-style data collection does.
    """
    generator = torch.Generator().manual_seed(seed)
    position = torch.rand(n_episodes, 2, generator=generator) * 2 - 1
    goal = torch.rand(n_episodes, 2, generator=generator) * 2 - 1
    velocity = torch.zeros(n_episodes, 2)
    observations, actions = [], []
    for _ in range(horizon):
        obs = torch.cat([position, velocity, goal], dim=-1)
        action = expert_action(obs)
        observations.append(obs)
        actions.append(action)
        executed = action + action_noise * torch.randn(n_episodes, 2, generator=generator)
        velocity = velocity + dt * executed
        position = position + dt * velocity
    return torch.stack(observations, dim=1), torch.stack(actions, dim=1)


class ObservationNormalizer(nn.Module):
    """Standardizes observations with statistics fitted on the training split."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def set_stats(self, stats: Mapping[str, Any]) -> None:
        """Copies ``{"mean": ..., "std": ...}`` in, keeping the buffers' dtype and device."""
        self.mean.copy_(torch.as_tensor(stats["mean"]))
        self.std.copy_(torch.as_tensor(stats["std"]))

    def stats(self) -> dict[str, list[float]]:
        """The statistics as plain lists (stored under ``CheckpointKey.INPUT_STATS``)."""
        return {"mean": self.mean.float().tolist(), "std": self.std.float().tolist()}

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.mean) / self.std


class BehaviorCloningPolicy(L.LightningModule):
    """An MLP policy trained to imitate the expert's actions (MSE)."""

    def __init__(
        self,
        width: int = 64,
        depth: int = 2,
        lr: float = 3e-3,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.normalizer = ObservationNormalizer(OBS_DIM)
        layers: list[nn.Module] = []
        in_features = OBS_DIM
        for _ in range(depth):
            layers += [nn.Linear(in_features, width), nn.GELU()]
            in_features = width
        layers.append(nn.Linear(in_features, ACT_DIM))
        self.policy = nn.Sequential(*layers)

    def compile_targets(self) -> list[nn.Module]:
        """Only the MLP is compiled; the normalizer is two elementwise ops."""
        return [self.policy]

    @override
    def setup(self, stage: str) -> None:
        """Before a fit, copies the datamodule's training-split statistics into the normalizer."""
        datamodule = getattr(self.trainer, "datamodule", None)
        if stage == "fit" and datamodule is not None and hasattr(datamodule, "input_stats"):
            self.normalizer.set_stats(datamodule.input_stats)

    @override
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(self.normalizer(obs))

    def _loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        obs, action = batch
        return nn.functional.mse_loss(self(obs).float(), action.float())

    @override
    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(batch[0]))
        return loss

    @override
    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), on_epoch=True, batch_size=len(batch[0]))

    @override
    def predict_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        return self(batch[0])

    @override
    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            self.parameters(),
            lr=self.hparams.lr,
            eps=self.hparams.eps,
            weight_decay=self.hparams.weight_decay,
        )

    @override
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Stores the normalizer's statistics, so inference normalizes as training did."""
        checkpoint[CheckpointKey.INPUT_STATS.value] = self.normalizer.stats()

    @override
    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the normalizer's statistics, when the checkpoint has them."""
        if CheckpointKey.INPUT_STATS.value in checkpoint:
            self.normalizer.set_stats(checkpoint[CheckpointKey.INPUT_STATS.value])


class ReachingDemonstrations(L.LightningDataModule):
    """Expert demonstrations split by episode into train and validation sets."""

    def __init__(self, params: ReachingParams) -> None:
        super().__init__()
        self.params = params
        self.train_set: TensorDataset | None = None
        self.val_set: TensorDataset | None = None
        self.input_stats: dict[str, list[float]] = {}

    @override
    def setup(self, stage: str | None = None) -> None:
        """Generates the demonstrations once and splits them by episode.

        The input statistics are fitted on the training split only.
        """
        if self.train_set is not None:
            return
        p = self.params
        obs, action = generate_demonstrations(p.n_episodes, p.horizon, p.action_noise, p.data_seed)
        n_val = max(1, round(p.n_episodes * p.val_fraction))
        train_obs, val_obs = obs[n_val:].flatten(0, 1), obs[:n_val].flatten(0, 1)
        train_act, val_act = action[n_val:].flatten(0, 1), action[:n_val].flatten(0, 1)
        self.train_set = TensorDataset(train_obs, train_act)
        self.val_set = TensorDataset(val_obs, val_act)
        self.input_stats = {
            "mean": train_obs.mean(0).tolist(),
            "std": train_obs.std(0).clamp_min(1e-6).tolist(),
        }

    def _loader(self, dataset: TensorDataset | None, shuffle: bool) -> DataLoader:
        assert dataset is not None, "call setup() first"
        # Whole batches are sliced out of the tensors at once; per-sample collation
        # would cost more than the MLP itself.
        sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
        batches = BatchSampler(sampler, batch_size=self.params.batch_size, drop_last=False)
        return DataLoader(dataset, sampler=batches, batch_size=None)

    @override
    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    @override
    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)

    @override
    def predict_dataloader(self) -> DataLoader:
        return self.val_dataloader()


def build(params: Mapping[str, Any]) -> tuple[BehaviorCloningPolicy, ReachingDemonstrations]:
    """The task factory: ``params`` are :class:`ReachingParams` fields."""
    p = ReachingParams(**params)
    model = BehaviorCloningPolicy(
        width=p.width, depth=p.depth, lr=p.lr, eps=p.eps, weight_decay=p.weight_decay
    )
    return model, ReachingDemonstrations(p)


build.params_model = ReachingParams  # lets versatil validate and resolve params up front
