"""The reaching task's params: a light module, so a sweep checks them before Ray starts."""

from __future__ import annotations

import pydantic

__all__ = ["ReachingParams"]


class ReachingParams(pydantic.BaseModel):
    """Parameters of the reaching task; every field may be set in a sweep's ``task.params``."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    n_episodes: int = pydantic.Field(128, ge=4, description="Expert episodes generated.")
    horizon: int = pydantic.Field(50, ge=2, description="Steps per episode.")
    val_fraction: float = pydantic.Field(0.2, gt=0, lt=1, description="Episodes held out.")
    action_noise: float = pydantic.Field(0.1, ge=0, description="Noise injected while rolling out.")
    batch_size: int = pydantic.Field(256, ge=1, description="Samples per optimizer step.")
    width: int = pydantic.Field(64, ge=1, description="Hidden units per layer.")
    depth: int = pydantic.Field(2, ge=1, description="Hidden layers.")
    lr: float = pydantic.Field(3e-3, gt=0, description="Adam learning rate.")
    eps: float = pydantic.Field(1e-8, gt=0, description="Adam eps; 16-true needs ~1e-4.")
    weight_decay: float = pydantic.Field(0.0, ge=0, description="AdamW weight decay.")
    data_seed: int = pydantic.Field(0, description="Seed of the generated demonstrations.")
