"""The task's validation objective and validation batches, through Lightning's own loop."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import lightning as L

from versatil.training.apply import trainer_precision
from versatil.training.constants import PrecisionType
from versatil.training.spec import TrialSettings

__all__ = ["validate_objective", "validation_batches"]

# Validation compares a float model with its INT8 copy, which computes in float32: both run
# under float32 settings, whatever precision the model was trained in.
_FLOAT32 = TrialSettings(precision=PrecisionType.FP32)

# Noise Lightning prints for every small in-memory validation; none of it is actionable.
_QUIET = (
    r".*does not have many workers.*",
    r".*isinstance\(treespec, LeafSpec\).*",
)


def validate_objective(
    module: L.LightningModule, datamodule: L.LightningDataModule | None, objective: str
) -> float:
    """Runs ``Trainer.validate`` on CPU in float32 and returns the logged ``objective``.

    Args:
        module: The model; a module without a datamodule brings its own dataloaders.
        datamodule: The task's datamodule, or ``None``.
        objective: The metric the module's ``validation_step`` logs (``val_loss``).

    Raises:
        KeyError: when validation logs no ``objective``; the message lists what it logged.
    """
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        precision=trainer_precision(_FLOAT32),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with warnings.catch_warnings():
        for pattern in _QUIET:
            warnings.filterwarnings("ignore", message=pattern)
        if datamodule is None:
            trainer.validate(module, verbose=False)
        else:
            trainer.validate(module, datamodule=datamodule, verbose=False)
    metrics = trainer.callback_metrics
    if objective not in metrics:
        logged = ", ".join(sorted(metrics)) or "nothing"
        raise KeyError(f"validation logged no {objective!r}; it logged: {logged}")
    return float(metrics[objective])


def validation_batches(
    module: L.LightningModule,
    datamodule: L.LightningDataModule | None,
    max_batches: int | None = None,
) -> list[Any]:
    """The validation dataloader's batches, in order (from every dataloader, when several).

    Call it after :func:`validate_objective`, which set the datamodule up.

    Args:
        module: The model, whose ``val_dataloader`` is used without a datamodule.
        datamodule: The task's datamodule, or ``None``.
        max_batches: Keep at most this many batches; ``None`` keeps them all.
    """
    source = datamodule if datamodule is not None else module
    loaders = source.val_dataloader()
    if isinstance(loaders, Mapping):
        loaders = list(loaders.values())
    elif not isinstance(loaders, list | tuple):
        loaders = [loaders]
    batches: list[Any] = []
    for loader in loaders:
        for batch in loader:
            if max_batches is not None and len(batches) >= max_batches:
                return batches
            batches.append(batch)
    return batches
